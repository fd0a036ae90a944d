import sys

from mixin.build import main

sys.exit(main())
