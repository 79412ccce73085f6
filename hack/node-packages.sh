#!/usr/bin/env bash
# Installs the Debian packages the tests need and Go modules cannot provide:
# make, nftables (the partition tests cut loopback traffic between agents), and
# for the real node of internal/realnode runc, the CNI plugins (/usr/lib/cni),
# conntrack and iptables, and chromium (the browser tests open the zone's
# matrix picture as an operator would). Installs only what is missing; needs
# root for that.
set -euo pipefail
need=()
command -v make >/dev/null || need+=(make)
command -v nft >/dev/null || need+=(nftables)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v conntrack >/dev/null || need+=(conntrack)
command -v iptables >/dev/null || need+=(iptables)
command -v chromium >/dev/null || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "the tests need these Debian packages: ${need[*]}; install them as root (apt-get install ${need[*]})" >&2
  exit 1
fi
echo "installing Debian packages: ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
