#!/bin/sh
# masked_proc.sh COMMAND...: runs COMMAND as root in a mount namespace of its own where a
# path under /proc is masked the way Docker masks them (a bind mount over /proc/timer_list),
# so that bwrap cannot mount a procfs in a user namespace -- a container's failure, made on
# this machine without a container engine. Exit 77 when this is not root (only root can
# make the mask); else COMMAND's exit code.
set -eu
if [ "$(id -u)" != 0 ]; then
    echo "masked_proc.sh: SKIPPED: masking /proc needs root (unshare -m)" >&2
    exit 77
fi
if [ ! -e /proc/timer_list ]; then
    echo "masked_proc.sh: this kernel has no /proc/timer_list to mask" >&2
    exit 1
fi
exec unshare -m /bin/sh -c 'set -e
mount --make-rprivate /
mount --bind /dev/null /proc/timer_list
exec "$@"' masked_proc "$@"
