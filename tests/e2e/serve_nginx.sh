#!/usr/bin/env bash
# Two `vkvector serve` on the default model behind Debian's nginx, hashing
# consistently on the X-Session-Id header, the recipe of docs/SERVE.md
# ("Several GPUs or nodes"), with each server's /metrics read directly:
#   - a 3-turn chat that resends its history under one session id reuses its
#     prefix (cached_tokens > 0 on turns 2 and 3) and lands on one server;
#   - 16 session ids spread over both servers, and each id's second request
#     goes to the server of its first;
#   - requests without the header (the fallback key, the client's address)
#     stay on one server;
#   - a streamed answer comes through whole.
# nginx runs in the foreground as the calling user, every path in a temporary
# directory. Skips (77) only without a Vulkan device; fails without nginx.
#
#   serve_nginx.sh VKVECTOR
set -euo pipefail
vkv=$1
model=models/vkvector-shakespeare.gguf
name=serve_nginx

rc=0
out=$("$vkv" devices 2>&1) || rc=$?
if [ "$rc" -ne 0 ]; then
  if [ "$rc" -eq 77 ] || grep -Eq "no Vulkan (driver|device) found" <<<"$out"; then
    echo "$name: SKIP: no Vulkan device"; exit 77
  fi
  echo "$name: FAIL: 'vkvector devices' failed: $out"; exit 1
fi
# Debian's nginx lives in /usr/sbin, which a non-root PATH may lack.
nginx=$(command -v nginx || true)
[ -n "$nginx" ] || { [ -x /usr/sbin/nginx ] && nginx=/usr/sbin/nginx; } || true
if [ -z "$nginx" ]; then
  echo "$name: FAIL: needs nginx (Debian: apt-get install nginx; tools/setup.sh --test installs it)"
  exit 1
fi
command -v curl >/dev/null || { echo "$name: FAIL: needs curl"; exit 1; }

tmp=$(mktemp -d)
pids=()
nginx_pid=
cleanup() {
  local p
  for p in $nginx_pid "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in $nginx_pid "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

fails=0 checks=0
pass() { checks=$((checks + 1)); echo "$name: ok: $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "$name: FAIL: $*"; }
# Stops at once, with the logs.
die() {
  echo "$name: FAIL: $*"
  for f in "$tmp"/server*.log "$tmp"/nginx.stderr "$tmp"/error.log; do
    [ -f "$f" ] && { echo "--- ${f##*/} (last lines)"; tail -n 20 "$f"; }
  done
  exit 1
}

# JSON in and out of the requests.
cat >"$tmp/j.py" <<'EOF'
import json, sys
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "add":            # add CONV ROLE TEXT: append a message to the conversation
    msgs = json.load(open(args[0]))
    msgs.append({"role": args[1], "content": args[2]})
    json.dump(msgs, open(args[0], "w"))
elif cmd == "body":         # body MODEL CONV MAX_TOKENS: a chat request
    print(json.dumps({"model": args[0], "messages": json.load(open(args[1])),
                      "max_tokens": int(args[2]), "temperature": 0, "stream": False}))
elif cmd == "answer":       # answer RESPONSE: finish_reason, prompt and cached tokens, content
    r = json.load(open(args[0]))
    u = r["usage"]
    print(r["choices"][0]["finish_reason"], u["prompt_tokens"],
          u.get("prompt_tokens_details", {}).get("cached_tokens", 0), json.dumps(r["choices"][0]["message"]["content"]))
elif cmd == "content":
    print(json.load(open(args[0]))["choices"][0]["message"]["content"])
elif cmd == "model":        # model MODELS: the first model's id
    print(json.load(open(args[0]))["data"][0]["id"])
EOF
j() { python3 "$tmp/j.py" "$@"; }

# Two servers on free ports, each on the default device.
for i in 0 1; do
  "$vkv" serve -m "$model" --port 0 >"$tmp/server$i.out" 2>"$tmp/server$i.log" &
  pids+=($!)
done
ports=()
for i in 0 1; do
  port=
  for _ in $(seq 600); do
    port=$(sed -n 's#.*listening on http://[^ ]*:\([0-9][0-9]*\).*#\1#p' "$tmp/server$i.log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "${pids[$i]}" 2>/dev/null || die "server $i exited before listening"
    sleep 0.1
  done
  [ -n "$port" ] || die "server $i did not listen within 60 s"
  ports+=("$port")
done
curl -sf "http://127.0.0.1:${ports[0]}/v1/models" -o "$tmp/models.json" || die "GET /v1/models failed"
model_id=$(j model "$tmp/models.json")

# nginx in the foreground, every file it writes in $tmp. Run as root its workers
# would drop to another user, who cannot enter $tmp (mode 0700): keep them root.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
write_conf() {
  local user=""
  [ "$(id -u)" -eq 0 ] && user="user root;"
  cat >"$tmp/nginx.conf" <<EOF
$user
daemon off;
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/error.log warn;
events { worker_connections 256; }
http {
  access_log $tmp/access.log;
  client_body_temp_path $tmp/client_body;
  proxy_temp_path $tmp/proxy;
  fastcgi_temp_path $tmp/fastcgi;
  uwsgi_temp_path $tmp/uwsgi;
  scgi_temp_path $tmp/scgi;

  # The session key: the X-Session-Id header, else the client's address.
  map \$http_x_session_id \$vkvector_session {
    ""      \$remote_addr;
    default \$http_x_session_id;
  }
  upstream vkvector {
    hash \$vkvector_session consistent;
    server 127.0.0.1:${ports[0]};
    server 127.0.0.1:${ports[1]};
    keepalive 16;
  }
  server {
    listen 127.0.0.1:$1;
    client_max_body_size 4m;
    location / {
      proxy_pass http://vkvector;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 1h;
      proxy_send_timeout 1h;
    }
  }
}
EOF
}
lb=
for _ in 1 2 3; do
  nport=$(free_port)
  write_conf "$nport"
  "$nginx" -p "$tmp" -c "$tmp/nginx.conf" >"$tmp/nginx.stderr" 2>&1 &
  nginx_pid=$!
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$nport/health" && { lb="http://127.0.0.1:$nport"; break; }
    kill -0 "$nginx_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$lb" ] && break
  kill "$nginx_pid" 2>/dev/null || true
  wait "$nginx_pid" 2>/dev/null || true
  nginx_pid=
  grep -q "Address already in use" "$tmp/nginx.stderr" "$tmp/error.log" 2>/dev/null || break
done
[ -n "$lb" ] || die "nginx did not start (config $tmp/nginx.conf)"
echo "$name: servers on ports ${ports[0]} and ${ports[1]}, nginx on $nport ($("$nginx" -v 2>&1))"

# finished I: server I's finished requests (outcome stop or length), read from
# it directly, in cnt.
finished() {
  local m
  m=$(curl -sf --max-time 10 "http://127.0.0.1:${ports[$1]}/metrics") || die "server $1's /metrics did not answer"
  cnt=$(awk '$1 ~ /^vkvector_requests_total\{outcome="(stop|length)"\}$/ { n += $2 } END { print n + 0 }' <<<"$m")
}
# snap: the counts now, in c0 c1.  grown N: waits (2 s at most) until the two
# together grew by N since snap, then d0 d1 are each one's growth and snap is redone.
snap() { finished 0; c0=$cnt; finished 1; c1=$cnt; }
grown() {
  local n0 n1
  for _ in $(seq 40); do
    finished 0; n0=$cnt; finished 1; n1=$cnt
    [ $((n0 - c0 + n1 - c1)) -ge "$1" ] && break
    sleep 0.05
  done
  d0=$((n0 - c0)) d1=$((n1 - c1)) c0=$n0 c1=$n1
}
# post SESSION BODY OUT: a chat request through nginx (no header with SESSION
# empty); prints the HTTP status.
post() {
  local hdr=()
  [ -n "$1" ] && hdr=(-H "X-Session-Id: $1")
  curl -sS --max-time 120 -o "$3" -w '%{http_code}' "${hdr[@]}" -H 'Content-Type: application/json' \
    --data-binary "@$2" "$lb/v1/chat/completions" || echo "curl-failed"
}
# one SESSION TEXT MAX_TOKENS: a one-message chat (TEXT already a JSON string's
# inside); which server took it, in who (0, 1 or -).
one() {
  printf '{"model": "%s", "messages": [{"role": "user", "content": "%s"}], "max_tokens": %d, "temperature": 0}' \
    "$model_id" "$2" "$3" >"$tmp/one.body"
  local status
  status=$(post "$1" "$tmp/one.body" "$tmp/one.out")
  [ "$status" = 200 ] || die "session '$1': HTTP $status: $(cat "$tmp/one.out" 2>/dev/null)"
  grown 1
  if [ "$d0" -eq 1 ] && [ "$d1" -eq 0 ]; then who=0
  elif [ "$d0" -eq 0 ] && [ "$d1" -eq 1 ]; then who=1
  else who=-; fi
}

# a) One conversation, 3 turns, each resending the history.
turns=("ROMEO:
But, soft! what light through yonder window breaks?
It is the east, and Juliet is the sun.
Arise, fair sun, and kill the envious moon,
Who is already sick and pale with grief,
That thou her maid art far more fair than she:
Be not her maid, since she is envious;
Her vestal livery is but sick and green
And none but fools do wear it; cast it off.
It is my lady, O, it is my love!
O, that she knew she were!"
"JULIET:
O Romeo, Romeo! wherefore art thou Romeo?
Deny thy father and refuse thy name;
Or, if thou wilt not, be but sworn my love,
And I'll no longer be a Capulet."
"ROMEO:
Shall I hear more, or shall I speak at this?")
echo '[]' >"$tmp/conv.json"
snap
for t in 1 2 3; do
  j add "$tmp/conv.json" user "${turns[t - 1]}"
  j body "$model_id" "$tmp/conv.json" 8 >"$tmp/turn$t.body"
  status=$(post alice "$tmp/turn$t.body" "$tmp/turn$t.out")
  [ "$status" = 200 ] || die "turn $t: HTTP $status: $(cat "$tmp/turn$t.out" 2>/dev/null)"
  read -r finish prompt cached text < <(j answer "$tmp/turn$t.out")
  echo "$name: turn $t: $prompt prompt tokens, $cached cached, $finish: $text"
  if [ "$t" -gt 1 ]; then
    if [ "$cached" -gt 0 ]; then pass "turn $t reuses the conversation's prefix ($cached of $prompt tokens cached)"
    else fail "turn $t reused no prefix (cached_tokens 0 of $prompt): its turns went to different servers?"; fi
  fi
  j add "$tmp/conv.json" assistant "$(j content "$tmp/turn$t.out")"
done
# b) All three on one server.
grown 3
if { [ "$d0" -eq 3 ] && [ "$d1" -eq 0 ]; } || { [ "$d0" -eq 0 ] && [ "$d1" -eq 3 ]; }; then
  pass "the conversation's 3 turns all went to one server (finished requests grew by $d0 and $d1)"
else
  fail "the conversation's 3 turns were split: finished requests grew by $d0 and $d1, not 3 and 0"
fi

# c) 16 sessions: both servers take some; each session's second request goes
# to the server of its first. Which ids go where depends on the servers' ports
# (the hash ring's points): all 16 on one server is about 1 port pair in 20000.
snap
first=()
n=(0 0)
for s in $(seq 16); do
  one "s$s" "KING HENRY:\nOnce more unto the breach, dear friends, once more; s$s" 2
  [ "$who" != - ] || die "session s$s: no single server counted it (grew by $d0 and $d1)"
  first[s]=$who
  n[who]=$((n[who] + 1))
done
if [ "${n[0]}" -gt 0 ] && [ "${n[1]}" -gt 0 ]; then
  pass "16 sessions spread over both servers (${n[0]} and ${n[1]})"
else
  fail "16 sessions all went to one server (${n[0]} and ${n[1]})"
fi
moved=""
for s in $(seq 16); do
  one "s$s" "KING HENRY:\nOr close the wall up with our English dead. s$s" 2
  [ "$who" = "${first[$s]}" ] || moved+=" s$s (server ${first[$s]}, then $who)"
done
if [ -z "$moved" ]; then pass "each session's second request went to the server of its first"
else fail "sessions moved:$moved"; fi

# d) No header: the fallback key (the client's address) keeps them together.
snap
ws=()
for k in 1 2 3; do
  one "" "GLOUCESTER:\nNow is the winter of our discontent. $k" 2
  ws+=("$who")
done
if [ "${ws[0]}" != - ] && [ "${ws[0]}" = "${ws[1]}" ] && [ "${ws[1]}" = "${ws[2]}" ]; then
  pass "3 requests without X-Session-Id went to one server (server ${ws[0]})"
else
  fail "3 requests without X-Session-Id went to servers ${ws[*]}"
fi

# e) A stream through nginx: server-sent events, every chunk, then [DONE].
printf '{"model": "%s", "messages": [{"role": "user", "content": "ROMEO:\\nWhat says my love?"}], "max_tokens": 8, "temperature": 0, "stream": true}' \
  "$model_id" >"$tmp/stream.body"
curl -sS -N --max-time 120 -H "X-Session-Id: alice" -H 'Content-Type: application/json' \
  --data-binary "@$tmp/stream.body" "$lb/v1/chat/completions" >"$tmp/stream.out" 2>&1 || true
chunks=$(grep -c '^data: {' "$tmp/stream.out" || true)
last=$(grep '^data: ' "$tmp/stream.out" | tail -n 1)
if [ "$chunks" -ge 2 ] && [ "$last" = "data: [DONE]" ]; then
  pass "a streamed chat through nginx: $chunks chunks, then [DONE]"
else
  fail "a streamed chat through nginx: $chunks chunks, last line '$last': $(head -c 300 "$tmp/stream.out")"
fi

if [ "$fails" -gt 0 ]; then
  echo "$name: $fails of $checks checks failed"
  exit 1
fi
echo "$name: all $checks checks passed"
