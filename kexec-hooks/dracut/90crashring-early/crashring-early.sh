#!/bin/sh
# dracut pre-udev hook: loads crashring with the options arm wrote.
modprobe crashring || warn "crashring: the module did not load: this boot records nothing"
