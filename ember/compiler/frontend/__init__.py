"""The compiler's frontend (ARCHITECTURE.md §4): capture Python into a ``Graph``, cache graphs
under guards, replay, explain, and the backend registry through which it reaches a backend."""
