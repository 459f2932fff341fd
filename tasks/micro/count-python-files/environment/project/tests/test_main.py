def test_main():
    pass
