#!/bin/sh
# tern-cli on bad input (being written).
exit 0
