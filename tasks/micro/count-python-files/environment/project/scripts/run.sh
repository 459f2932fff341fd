#!/bin/sh
python3 -m app.main
