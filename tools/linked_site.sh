# Sourced by tools/loop_cpu.sh and tools/gpu/loop_warm.sh: a build that is this environment's own torch,
# installed nowhere.
#     linked_site SITE DEST   # DEST holds SITE's entries as links and torch/ as a tree of links, so that one
#                             # file of torch can be replaced by a patched copy
linked_site() {
    local entry
    mkdir -p "$2" || return 1
    for entry in "$1"/*; do
        [ "$(basename "$entry")" = torch ] || ln -s "$entry" "$2/" || return 1
    done
    cp -as "$1/torch" "$2/torch"
}
