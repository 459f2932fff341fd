#!/bin/sh
echo rebuilding site
