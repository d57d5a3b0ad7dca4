"""A tasks module that fails to import (a deploy gone wrong)."""

raise RuntimeError("this module is broken")
