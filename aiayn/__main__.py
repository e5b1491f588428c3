import os
import sys

try:  # a Ctrl-C in the first moments, before main() has taken the signal over, is the same clean stop
    from aiayn.cli import main
except KeyboardInterrupt:
    os.write(2, b"aiayn: interrupted\n")
    os._exit(130)

sys.exit(main())
