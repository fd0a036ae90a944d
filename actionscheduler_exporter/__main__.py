import sys

from actionscheduler_exporter.cli import main

sys.exit(main())
