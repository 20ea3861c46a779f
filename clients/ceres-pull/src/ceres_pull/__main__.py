import sys

from ceres_pull.pull import main

sys.exit(main())
