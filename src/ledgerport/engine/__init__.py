"""The engine: the workers that own everything after a commit (the scheduler today; the
dispatcher, delivery actors and run queue next). Started by ``ledgerport.serve``."""

from ._scheduler import Scheduler as Scheduler
