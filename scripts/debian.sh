#!/usr/bin/env bash
# Installs Debian packages for the tests without touching the system: downloads the
# given packages (with `apt-get download`, from the machine's Debian mirror) and unpacks
# them once into ${XDG_CACHE_HOME:-~/.cache}/lakejoin/debian/<name>/, then prints that
# directory. Later runs find the stamp and only print it. Libraries the packages bring
# are under <dir>/usr/lib/x86_64-linux-gnu (put it on LD_LIBRARY_PATH).
#
#   scripts/debian.sh <name> <package>...      e.g. scripts/debian.sh strace strace libunwind8
#
# Needs apt-get and dpkg-deb (every Debian machine). When the package lists are missing
# or stale it runs `apt-get update` once, which needs root.

set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: $0 <name> <package>..." >&2; exit 64; }
name="$1"
shift
CACHE_ROOT="${XDG_CACHE_HOME:-${HOME}/.cache}/lakejoin/debian"
dir="${CACHE_ROOT}/${name}"
stamp="${dir}/.installed"
wanted="$*"

if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${wanted}" ]]; then
    echo "${dir}"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cd "${work}"
if ! apt-get download "$@" >"${work}/download.log" 2>&1; then
    echo "debian.sh: apt-get download $* failed; updating the package lists once" >&2
    apt-get update -qq >&2
    apt-get download "$@" >&2
fi
rm -rf "${dir}"
mkdir -p "${dir}"
for deb in ./*.deb; do
    dpkg-deb -x "${deb}" "${dir}"
done
echo "${wanted}" > "${stamp}"
echo "${dir}"
