"""Exit codes of `tuidag run`: 0 every task succeeded; 1 any task failed, was skipped or cancelled; 2 bad input or
usage; 128 + signal number after SIGINT (130), SIGTERM (143) or SIGHUP (129)."""

import signal

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
