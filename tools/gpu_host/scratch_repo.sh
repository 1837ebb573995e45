# Sourced by the GPU scripts that need a commit (tools/gpu_host/history_demo.sh, bisect_demo.sh, ab_demo.sh,
# ab_sensitivity_device.sh, merge_gate_device.sh): a scratch git repository made from a
# copy of this tree (without its .git, where the copy has one, and the carried wheels), so every run records a real
# commit of exactly the files the run was given.
#
#   source tools/gpu_host/scratch_repo.sh; scratch_repo NAME      → sets $scratch (removed at exit) and $repo, cd's there
#   scratch_commit MESSAGE                               → commits every change in $repo
#   demo_output DIR                                      → sets $out (absolute, created), logs to $out/demo.log
demo_output() {
    mkdir -p "$1"
    out=$(cd "$1" && pwd)
    exec > >(tee "$out/demo.log") 2>&1
}

require_git() {  # $1: the demo's name, $2: its output folder
    command -v git >/dev/null && return 0
    echo "$1: git is not installed on this machine; the demo needs it (apt-get install git)" | tee "$2/NO_GIT"
    exit 3
}

scratch_repo() {
    local source_tree
    source_tree=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    scratch=$(mktemp -d "/tmp/gpuperf-$1.XXXXXX")
    trap 'rm -rf "$scratch"' EXIT
    repo=$scratch/repo
    mkdir "$repo"
    tar -C "$source_tree" --exclude=./.git --exclude=./.whl --exclude=./results --exclude=./.kernel_cache --exclude='__pycache__' \
        -cf - . | tar -C "$repo" -xf -
    cd "$repo"
    git init -q
    git config user.name "gpuperf demo"
    git config user.email demo@gpuperf
}

scratch_commit() { git add -A && git commit -qm "$1"; }
