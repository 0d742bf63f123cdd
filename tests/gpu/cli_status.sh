#!/bin/sh
# For CTest's PASS_REGULAR_EXPRESSION: runs a command, prints its output (stderr included)
# and then "exit=<status>", so one expression checks both the message and the status.
# With --unless-gpu first, prints "SKIP: a CUDA device is present" and runs nothing when
# nvidia-smi lists a device (there --device cuda would really start).
if [ "$1" = "--unless-gpu" ]; then
  shift
  if nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: a CUDA device is present"
    exit 0
  fi
fi
"$@" 2>&1
echo "exit=$?"
