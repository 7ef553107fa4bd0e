"""The dispatch layer's Python half: the event kinds and masks, switching
the interpreter's mechanisms on and off as consumers come and go
(switch.py, with sys.monitoring in monitoring.py), Python handlers
(handlers.py) and the USDT probes (probes.py)."""
