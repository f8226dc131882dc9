#!/usr/bin/env bash
# The disk `make bench` runs on: an ordinary journaled filesystem, never a
# tuned one.
#   bench-disk.sh up DIR    as root: make a 4 GiB ext4 image with mkfs's
#                           defaults (journal included), loop-mount it on DIR
#                           and print DIR; otherwise create DIR on the
#                           current disk and print it.
#   bench-disk.sh down DIR  unmount and remove what `up` made.
#   bench-disk.sh describe DIR
#                           one line naming the device, filesystem, mount
#                           options and whether it has a journal.
set -euo pipefail
cmd=$1 dir=$2
img="$dir.img"
case "$cmd" in
up)
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null && ! mountpoint -q "$dir"; then
    rm -f "$img"
    truncate -s 4G "$img"
    mkfs.ext4 -q -F "$img"
    mount -o loop "$img" "$dir"
    chmod 1777 "$dir"
  fi
  echo "$dir"
  ;;
down)
  if mountpoint -q "$dir"; then umount "$dir"; fi
  rm -rf "$dir" "$img"
  ;;
describe)
  src=$(findmnt -n -o SOURCE -T "$dir")
  fs=$(findmnt -n -o FSTYPE -T "$dir")
  opts=$(findmnt -n -o OPTIONS -T "$dir")
  journal="unknown"
  if [ "$fs" = ext4 ] && command -v dumpe2fs >/dev/null; then
    dev=$src
    # a loop mount names its backing file in /proc/mounts as /dev/loopN
    if dumpe2fs -h "$dev" 2>/dev/null | grep -q '^Filesystem features:.*has_journal'; then
      journal="with a journal"
    else
      journal="without a journal"
    fi
  elif [ "$fs" = xfs ]; then
    journal="with a journal (xfs log)"
  fi
  echo "$fs ($journal) on $src, mounted $opts"
  ;;
*) echo "usage: $0 up|down|describe DIR" >&2; exit 2 ;;
esac
