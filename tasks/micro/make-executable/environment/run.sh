#!/bin/bash
echo "run ok"
