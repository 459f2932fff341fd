ROUTES = []
