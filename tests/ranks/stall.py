"""A Python rank that beats a few steps, then stalls in a named function."""
import sys
import time

import ltworker


def stuck_in_data_loader():
    while True:
        time.sleep(1)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for step in range(steps):
        ltworker.heartbeat(step)
        time.sleep(0.02)
    stuck_in_data_loader()


if __name__ == "__main__":
    main()
