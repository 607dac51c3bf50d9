#!/usr/bin/env bash
# The bash completion of ltctl and ltrun (packaging/completion/) against
# their parsers (`--list-options`): every verb and every long option is
# offered where it applies, and an option's value (or a flag's absence of
# one) never makes completion take PROGRAM to have started.
#   completion_test.sh LTCTL LTRUN COMPLETION_DIR
set -uo pipefail
ltctl=$1 ltrun=$2 dir=$3
export LTD_SOCKET=/nonexistent/ltd.sock  # no ltd: no job names offered
# shellcheck source=/dev/null
source "$dir/ltctl"
# shellcheck source=/dev/null
source "$dir/ltrun"
failures=0

# The completions of the words given, the last being the one under the cursor.
offered() {
  local fn=$1
  shift
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  "$fn"
  printf ' %s ' "${COMPREPLY[@]}"
}

expect_offered() {  # WHAT WORD COMPLETIONS
  if [[ $3 != *" $2 "* ]]; then
    echo "FAIL: $1: '$2' is not offered (offered:$3)"
    failures=$((failures + 1))
  fi
}

ltctl_list=$("$ltctl" --list-options) || { echo "FAIL: ltctl --list-options"; exit 1; }
ltrun_list=$("$ltrun" --list-options) || { echo "FAIL: ltrun --list-options"; exit 1; }

# What the parsers must list at the least (what the completion once lacked).
for want in "verb drain" "verb resume" "option submit --time value" "option submit --mem value" \
  "option submit --cpus value" "option submit -o value" "option submit -e value" \
  "option submit --hold-on-hang value" "option ps --me flag" "option ps --state value" \
  "option logs --timestamps flag" "option logs --since value" "option drain --reason value"; do
  grep -qxF -- "$want" <<<"$ltctl_list" || { echo "FAIL: ltctl lists no '$want'"; failures=$((failures + 1)); }
done
for want in "option - --time value" "option - --mem value" "option - --output value" \
  "option - --env value" "option - --no-slurm flag"; do
  grep -qxF -- "$want" <<<"$ltrun_list" || { echo "FAIL: ltrun lists no '$want'"; failures=$((failures + 1)); }
done

# Every verb after ltctl; every global long option too.
top=$(offered _ltctl "$ltctl" "")
dashes=$(offered _ltctl "$ltctl" --)
while read -r kind verb name type; do
  if [[ $kind == verb ]]; then
    expect_offered "ltctl <TAB>" "$verb" "$top"
    continue
  fi
  [[ $name == --* ]] || continue
  if [[ $verb == - ]]; then
    expect_offered "ltctl --<TAB>" "$name" "$dashes"
    continue
  fi
  expect_offered "ltctl $verb --<TAB>" "$name" "$(offered _ltctl "$ltctl" "$verb" --)"
  if [[ $verb == submit ]]; then
    # Options still come after this one (with its value): PROGRAM has not begun.
    if [[ $type == value ]]; then
      after=$(offered _ltctl "$ltctl" submit "$name" 1 --)
    else
      after=$(offered _ltctl "$ltctl" submit "$name" --)
    fi
    expect_offered "ltctl submit $name${type/flag/}${type/value/ 1} --<TAB>" --devices "$after"
  fi
done <<<"$ltctl_list"
# Past PROGRAM the words are the program's: no ltctl option is offered.
past=$(offered _ltctl "$ltctl" submit --devices 2 train.py --)
[[ $past != *" --devices "* ]] || { echo "FAIL: options offered past PROGRAM:$past"; failures=$((failures + 1)); }

dashes=$(offered _ltrun "$ltrun" --)
while read -r kind verb name type; do
  [[ $kind == option && $name == --* ]] || continue
  expect_offered "ltrun --<TAB>" "$name" "$dashes"
  if [[ $type == value ]]; then
    after=$(offered _ltrun "$ltrun" "$name" 1 --)
  else
    after=$(offered _ltrun "$ltrun" "$name" --)
  fi
  expect_offered "ltrun $name ... --<TAB>" --devices "$after"
done <<<"$ltrun_list"

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "every verb and option of ltctl and ltrun is offered"
