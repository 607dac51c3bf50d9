#!/bin/sh
# A wrapper as people write them: the Python is a child of the shell, not
# exec'd, so the rank's own process is the shell.
/usr/bin/python3 "$(dirname "$0")/auto_train.py" "$@"
