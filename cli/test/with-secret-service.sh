#!/usr/bin/env bash
# Runs a command inside a private D-Bus session with a throwaway, unlocked gnome-keyring, so the
# token-store tests use a real Secret Service without touching the user's own keyring:
#   cli/test/with-secret-service.sh npm test -- token-store
# Needs the Debian packages dbus, gnome-keyring and libsecret-tools. The command runs with
# SVC_REQUIRE_SECRET_SERVICE=1, so the Secret Service tests fail, not skip, when the keyring did
# not come up; with SVC_TEST_SECRET_SERVICE set to the private bus address when it did.
set -euo pipefail

if [[ "${SVC_SECRET_SERVICE_SESSION:-}" != 1 ]]; then
  if (($# == 0)); then
    echo "usage: $0 <command> [arguments...]" >&2
    exit 2
  fi
  missing=()
  for tool in dbus-run-session dbus-send dbus-update-activation-environment gnome-keyring-daemon secret-tool; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  if ((${#missing[@]} > 0)); then
    echo "$0: ${missing[*]} not found: install the Debian packages dbus, gnome-keyring and libsecret-tools" >&2
    exit 1
  fi
  SVC_SECRET_SERVICE_SESSION=1 exec dbus-run-session -- "$0" "$@"
fi
unset SVC_SECRET_SERVICE_SESSION

# From here on we run inside the private session: DBUS_SESSION_BUS_ADDRESS is its bus.
export SVC_REQUIRE_SECRET_SERVICE=1
unset SVC_TEST_SECRET_SERVICE SVC_TEST_SECRET_SERVICE_PID

keyring_home=$(mktemp -d "${TMPDIR:-/tmp}/svc-keyring.XXXXXX")
mkdir -m 700 "$keyring_home/run"
daemon_pid=
cleanup() {
  if [[ -n $daemon_pid ]]; then kill "$daemon_pid" 2>/dev/null || true; fi
  rm -rf "$keyring_home"
}
trap cleanup EXIT

# The daemon keeps its keyrings under this throwaway home and its control socket under the
# runtime directory. DISPLAY and WAYLAND_DISPLAY are emptied so that an unlock prompt fails at
# once instead of opening on the desktop of whoever runs the tests.
daemon_env=(
  HOME="$keyring_home" XDG_DATA_HOME="$keyring_home/data" XDG_CONFIG_HOME="$keyring_home/config"
  XDG_RUNTIME_DIR="$keyring_home/run" DISPLAY= WAYLAND_DISPLAY=
)
# D-Bus starts a daemon of its own on the first call to the Secret Service if ours is not on the
# bus yet; that one, and the prompter it may start, get the same environment.
dbus-update-activation-environment "${daemon_env[@]}"

bus() {
  dbus-send --session --print-reply=literal "$@" 2>/dev/null | tr -d '[:space:]'
}

started() {
  # --unlock reads the login keyring's password from stdin, creates that keyring when there is
  # none, unlocks it and makes it the `default` collection; the daemon then goes to background.
  printf '%s' svc-test-keyring |
    env "${daemon_env[@]}" gnome-keyring-daemon --unlock --components=secrets >/dev/null || return 1
  # Wait for it to own the Secret Service name; NameHasOwner does not start a daemon itself.
  local owned=
  for _ in $(seq 50); do
    owned=$(bus --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner \
      string:org.freedesktop.secrets) || true
    [[ $owned == booleantrue ]] && break
    sleep 0.1
  done
  if [[ $owned != booleantrue ]]; then
    echo "$0: gnome-keyring-daemon did not take the Secret Service name within 5 s" >&2
    return 1
  fi
  daemon_pid=$(bus --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets)
  daemon_pid=${daemon_pid#uint32}
  local default_collection
  default_collection=$(bus --dest=org.freedesktop.secrets /org/freedesktop/secrets \
    org.freedesktop.Secret.Service.ReadAlias string:default)
  if [[ -z $default_collection || $default_collection == / ]]; then
    echo "$0: the Secret Service has no \`default\` collection" >&2
    return 1
  fi
}

if started; then
  export SVC_TEST_SECRET_SERVICE="$DBUS_SESSION_BUS_ADDRESS"
  export SVC_TEST_SECRET_SERVICE_PID="$daemon_pid"
else
  echo "$0: no Secret Service; running the command anyway so its tests report the failure" >&2
fi

status=0
"$@" || status=$?
exit "$status"
