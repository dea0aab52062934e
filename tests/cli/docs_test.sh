#!/usr/bin/env bash
# Docs that work as written: checks of the README, docs/ and manifests/ for mistakes that read
# well and fail when a user follows them.
#   1. `kubectl auth can-i VERB RESOURCE/SUBRESOURCE` asks about an object named SUBRESOURCE;
#      a subresource is asked about with --subresource.
#   2. "change N things" (or "do N things", ...) is followed by a list of exactly N items.
#   3. No path of the machine the docs were written on (/work/, /root/, /home/<someone>/ other
#      than the placeholder YOU).
# Usage: docs_test.sh SOURCE_DIR
set -u
SRC=${1:?usage: docs_test.sh SOURCE_DIR}
cd "$SRC" || exit 1
files=(README.md docs/*.md manifests/*.yaml manifests/*/*.yaml)
status=0
fail() { echo "FAIL: $*"; status=1; }

# 1. can-i with a slash in the resource.
while IFS= read -r hit; do
  fail "$hit: kubectl auth can-i names a subresource with a slash; use --subresource=NAME"
done < <(grep -nE 'kubectl auth can-i +[a-z-]+ +[a-z.]+/[a-z]+' "${files[@]}" 2>/dev/null)

# 2. "N things:" followed by a list.
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  awk -v file="$f" '
    BEGIN { split("one two three four five six seven eight nine ten", w, " ");
            for (i in w) n[w[i]] = i; want = 0 }
    function report() {
      if (want > 0 && got != want)
        printf "FAIL: %s:%d: says %d things and lists %d\n", file, line, want, got
      want = 0
    }
    {
      if (want > 0) {
        if ($0 ~ /^[ \t]*[-*] +[Kk]eep /) { next }  # "keep X as it is" is not a change
        if ($0 ~ /^[ \t]*[-*] /) { got++; next }
        if ($0 ~ /^[ \t]*$/ && got == 0) next
        if ($0 ~ /^[ \t]+[^ \t-*]/ && got > 0) next  # a list item continued
        report()
      }
      if (match(tolower($0), /(change|do|set|check) (one|two|three|four|five|six|seven|eight|nine|ten) things:[ \t]*$/)) {
        s = tolower($0); sub(/.*(change|do|set|check) /, "", s); sub(/ things:.*/, "", s)
        want = n[s]; got = 0; line = NR
      }
    }
    END { report() }' "$f" | grep . && status=1
done

# 3. Machine paths.
while IFS= read -r hit; do
  fail "$hit: a path of one machine; say where the file is relative to the repository"
done < <(grep -nE '(^|[ `"(])/(work|root)/|/home/[a-z]+/' "${files[@]}" 2>/dev/null | grep -v '/home/YOU/')

[ $status -eq 0 ] && echo "docs: ${#files[@]} files checked"
exit $status
