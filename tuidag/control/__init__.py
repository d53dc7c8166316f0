"""The control channel: a live run's Unix socket, its protocol, the engine's server and the clients. Never imports
textual."""
