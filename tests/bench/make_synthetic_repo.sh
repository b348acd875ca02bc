#!/usr/bin/env bash
# Builds a reproducible synthetic git history for bench_conflicts: a main line and topic
# branches merged back, some of them conflicting, a few with renames.
#
#   tests/bench/make_synthetic_repo.sh <dir> [merges=200] [files=100]
#
# With files = 100 (the default) the files sit side by side at the top; with more, in a
# tree the size of a real project's: 100 per directory, four subdirectories each
# (d<N>/s<M>/f<F>.txt), so a merge changes a few directories and leaves most alone.
# Each cycle: 5 commits on main, a topic branch from main~2 with 4 commits, a merge of the
# topic into main (10 commits per cycle, so 200 merges ≈ 2,000 commits). In about a quarter
# of the cycles main edits the same line as the topic (a conflict, resolved with "ours");
# in about one cycle in twenty the topic renames a file. Bash's RANDOM is seeded, and
# author/committer dates are fixed, so the same arguments give the same history.
set -euo pipefail
dir=${1:?usage: make_synthetic_repo.sh <dir> [merges]}
merges=${2:-200}
nfiles=${3:-100}
RANDOM=42
export GIT_CONFIG_NOSYSTEM=1 HOME="$dir/.home"
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
tick=1700000000
mkdir -p "$dir" "$HOME"
cd "$dir"
git init -q -b main .

nlines=20
# file_path <n>: where file n lives.
file_path() {
  if ((nfiles <= 100)); then
    echo "f$1.txt"
  else
    echo "d$(($1 / 100))/s$(($1 % 4))/f$1.txt"
  fi
}
for ((f = 0; f < nfiles; f++)); do
  path=$(file_path "$f")
  mkdir -p "$(dirname "$path")"
  awk -v f="$f" -v n="$nlines" 'BEGIN { for (l = 0; l < n; l++) print "file " f " line " l }' \
    > "$path"
done
git add .

commit() {
  tick=$((tick + 60))
  GIT_AUTHOR_DATE="$tick +0000" GIT_COMMITTER_DATE="$tick +0000" git commit -q "$@"
}
commit -m initial

# edit <file> <line> <text>: replaces one line of a file.
edit() {
  awk -v n="$2" -v t="$3" 'NR == n + 1 { print t; next } { print }' "$1" > "$1.tmp"
  mv "$1.tmp" "$1"
  git add "$1"
}

# pick_file: sets $picked to a random file. (Not echoed through $(...): bash reseeds RANDOM
# in subshells, which would make the history differ from run to run.)
pick_file() {
  local names
  if ((nfiles <= 100)); then names=(f*.txt); else names=(d*/s*/f*.txt); fi
  picked=${names[RANDOM % ${#names[@]}]}
}

for ((m = 0; m < merges; m++)); do
  for ((c = 0; c < 5; c++)); do
    pick_file
    f=$picked
    edit "$f" $((RANDOM % nlines)) "main $m.$c"
    commit -m "main $m.$c"
  done
  git checkout -q -b "topic$m" HEAD~2
  conflict_file=""
  conflict_line=0
  for ((c = 0; c < 4; c++)); do
    pick_file
    f=$picked
    line=$((RANDOM % nlines))
    edit "$f" "$line" "topic $m.$c"
    if [ $c -eq 0 ]; then conflict_file=$f; conflict_line=$line; fi
    commit -m "topic $m.$c"
  done
  if ((RANDOM % 20 == 0)); then
    pick_file
    f=$picked
    if [[ $f == */* ]]; then
      git mv "$f" "${f%/*}/renamed-$m-${f##*/}"
    else
      git mv "$f" "renamed-$m-$f"
    fi
    commit -m "topic $m rename"
  fi
  git checkout -q main
  if ((RANDOM % 4 == 0)) && [ -f "$conflict_file" ]; then
    edit "$conflict_file" "$conflict_line" "main conflicts $m"
    commit -m "main $m conflicting edit"
  fi
  tick=$((tick + 60))
  if ! GIT_AUTHOR_DATE="$tick +0000" GIT_COMMITTER_DATE="$tick +0000" \
      git merge -q --no-edit "topic$m" > /dev/null 2>&1; then
    git diff --name-only --diff-filter=U -z | xargs -0 -r git checkout -q --ours --
    git add -A
    commit --no-edit
  fi
  git branch -q -D "topic$m"
done
echo "$(git rev-list --count HEAD) commits, $(git rev-list --merges --count HEAD) merges in $dir"
