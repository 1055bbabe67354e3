#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: `start DIR [PORT]` makes a cluster in DIR and starts it, `stop DIR` stops it and removes DIR.
#
#   server.sh start DIR [PORT]   initdb into DIR/data, trust for local connections only, a Unix
#                                socket in DIR and, with PORT, TCP on 127.0.0.1:PORT; waits until
#                                the server accepts connections
#   server.sh stop DIR           pg_ctl stop -m fast, then removes DIR
#   server.sh bindir             prints the directory of PostgreSQL's binaries, or fails saying
#                                how to install them
#
# The superuser is `postgres` whoever runs this, so a URL is the same everywhere:
# postgres://postgres@127.0.0.1:PORT/postgres, or postgres://postgres@%2FDIR/postgres for the
# socket (percent-encoded DIR; port 5432 in the socket's name when no PORT is given).
# PostgreSQL refuses to run as root: as root, the cluster belongs to and runs as the `postgres`
# user. fsync stays on: the tests of durability run against it.
set -euo pipefail

program="$0"
# Names DIR as made here, so that `stop` never removes a directory it did not make.
marker=".protocol-run-postgres"

fail() {
  echo "$program: error: $*" >&2
  exit 1
}

usage() {
  echo "usage: $program start DIR [PORT] | stop DIR | bindir" >&2
  exit 2
}

# PostgreSQL's binaries: initdb on PATH, else Debian's /usr/lib/postgresql/VERSION/bin (newest),
# where its packages put them without putting them on PATH.
bindir() {
  local found
  if found="$(command -v initdb)"; then
    dirname "$(readlink -f "$found")"
    return
  fi
  for found in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$found/initdb" ] && [ -x "$found/pg_ctl" ]; then
      echo "$found"
      return
    fi
  done
  fail "PostgreSQL's initdb is neither on PATH nor in /usr/lib/postgresql/*/bin; install the \
server with \`apt-get install postgresql\` (or put its bin directory on PATH)"
}

# Runs a command as the user the server runs as: `postgres` for root, else the caller.
as_server_user() {
  if [ "$(id -u)" -ne 0 ]; then
    "$@"
  elif command -v runuser >/dev/null 2>&1; then
    (cd / && runuser -u postgres -- "$@")
  else
    # shellcheck disable=SC2016 # expanded by the inner shell
    (cd / && su postgres -s /bin/sh -c '"$0" "$@"' -- "$@")
  fi
}

# The last lines of the server's log, for an error.
log_tail() {
  if [ -f "$1/server.log" ]; then
    echo "--- the last lines of $1/server.log:"
    tail -n 20 "$1/server.log"
  fi
}

start() {
  local dir="$1" port="${2:-}" bin listen socket_port
  bin="$(bindir)"
  if [ -n "$port" ] && ! [[ "$port" =~ ^[0-9]+$ && "$port" -ge 1 && "$port" -le 65535 ]]; then
    fail "PORT \`$port\` is not a port number (1 to 65535)"
  fi
  if [ -n "$port" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "port $port on 127.0.0.1 is in use; choose another PORT"
  fi
  mkdir -p "$dir" || fail "cannot make DIR $dir; choose a directory you can write"
  dir="$(cd "$dir" && pwd)"
  if [ -e "$dir/data" ]; then
    fail "$dir already holds a cluster (in $dir/data); stop it with \`$program stop $dir\` or \
choose another DIR"
  fi
  socket_port="${port:-5432}"
  # The kernel's limit for a Unix socket's path (sun_path) is 108 bytes with the final NUL.
  if [ $((${#dir} + ${#socket_port} + 10)) -gt 107 ]; then
    fail "DIR $dir is too long for the Unix socket PostgreSQL makes in it (107 bytes at most \
with /.s.PGSQL.$socket_port); choose a shorter DIR, e.g. under /tmp"
  fi

  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || fail "PostgreSQL refuses to run as root and there is no \
\`postgres\` user to run it as; \`apt-get install postgresql\` makes one (or \`useradd --system \
postgres\`)"
    chown postgres: "$dir" || fail "cannot give $dir to the postgres user"
    as_server_user test -w "$dir" || fail "the postgres user cannot write $dir (a directory \
above it is closed to other users); choose a DIR under /tmp"
  fi
  touch "$dir/$marker"

  # --no-sync: initdb's own flush of the new files, not the server's fsync (which stays on); a
  # throwaway cluster does not outlive the machine.
  if ! as_server_user "$bin/initdb" --pgdata="$dir/data" --username=postgres --auth=trust \
    --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    fail "initdb failed making a cluster in $dir/data (its output is above)"
  fi

  # Trust, but only for connections from this machine: the socket and loopback.
  cat >"$dir/data/pg_hba.conf" <<'EOF'
local all all trust
host all all 127.0.0.1/32 trust
host all all ::1/128 trust
EOF
  if [ -n "$port" ]; then listen="127.0.0.1"; else listen=""; fi
  cat >>"$dir/data/postgresql.conf" <<EOF

# server.sh: a throwaway server for the tests (fsync stays on).
listen_addresses = '$listen'
port = $socket_port
unix_socket_directories = '$dir'
fsync = on
EOF

  if ! as_server_user "$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait \
    --timeout=60 start </dev/null >/dev/null 2>"$dir/pg_ctl.log"; then
    cat "$dir/pg_ctl.log" >&2
    log_tail "$dir" >&2
    fail "the server in $dir did not start (pg_ctl's output and the server's log are above); \
stop what is left with \`$program stop $dir\`"
  fi
  # pg_ctl --wait saw the server ready; ask it once more the way a client does.
  if [ -x "$bin/pg_isready" ] &&
    ! "$bin/pg_isready" --host="$dir" --port="$socket_port" --username=postgres --quiet; then
    log_tail "$dir" >&2
    fail "the server in $dir started but does not accept connections on its socket"
  fi
}

stop() {
  local dir="$1" bin
  [ -e "$dir" ] || return 0
  if [ ! -e "$dir/$marker" ]; then
    # Left empty by a start that failed early (a busy port): nothing to stop.
    rmdir "$dir" 2>/dev/null && return 0
    fail "$dir was not made by \`$program start\` (it has no $marker); not removing it"
  fi
  bin="$(bindir)"
  # `pg_ctl status` fails when no server runs (never started, or died): nothing to stop then.
  if as_server_user "$bin/pg_ctl" --pgdata="$dir/data" status >/dev/null 2>&1; then
    if ! as_server_user "$bin/pg_ctl" --pgdata="$dir/data" --mode=fast --wait --timeout=60 \
      stop >/dev/null 2>"$dir/pg_ctl.log"; then
      cat "$dir/pg_ctl.log" >&2
      log_tail "$dir" >&2
      fail "the server in $dir did not stop (pg_ctl's output is above); $dir is left in place"
    fi
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) [ $# -ge 2 ] && [ $# -le 3 ] || usage; start "$2" "${3:-}" ;;
  stop) [ $# -eq 2 ] || usage; stop "$2" ;;
  bindir) [ $# -eq 1 ] || usage; bindir ;;
  *) usage ;;
esac
