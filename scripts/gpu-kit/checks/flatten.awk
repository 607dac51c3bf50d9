# JSON to one "PATH<TAB>VALUE" line per scalar (root_cause.rank<TAB>1,
# slots.0.usage.memory_used_mib<TAB>200), so that the check script reads
# ltctl's and ltrun's JSON on a host with no Python or jq. Strings keep
# their escapes (\n stays two characters): one value, one line.
function ws() { while (pos <= n && index(" \t\r\n", substr(s, pos, 1))) pos++ }
function str(   out, rest, at, c) {
  pos++
  out = ""
  while (pos <= n) {
    rest = substr(s, pos, 4096)
    at = match(rest, /["\\]/)
    if (!at) { out = out rest; pos += length(rest); continue }
    out = out substr(rest, 1, at - 1)
    pos += at - 1
    c = substr(s, pos, 1)
    if (c == "\"") { pos++; return out }
    c = substr(s, pos + 1, 1)
    if (c == "\"" || c == "/") out = out c
    else out = out "\\" c
    pos += 2
  }
  return out
}
function value(path,   c, key, i, lit) {
  ws()
  c = substr(s, pos, 1)
  if (c == "{") {
    pos++; ws()
    if (substr(s, pos, 1) == "}") { pos++; return }
    while (pos <= n) {
      ws(); key = str(); ws(); pos++
      value(path == "" ? key : path "." key)
      ws(); c = substr(s, pos, 1); pos++
      if (c != ",") return
    }
  } else if (c == "[") {
    pos++; ws()
    if (substr(s, pos, 1) == "]") { pos++; return }
    for (i = 0; pos <= n; i++) {
      value(path "." i)
      ws(); c = substr(s, pos, 1); pos++
      if (c != ",") return
    }
  } else if (c == "\"") {
    print path "\t" str()
  } else {
    lit = substr(s, pos)
    match(lit, /^[^,}\] \t\r\n]*/)
    print path "\t" substr(lit, 1, RLENGTH)
    pos += RLENGTH
  }
}
{ s = s $0 "\n" }
END { n = length(s); pos = 1; value("") }
