#!/usr/bin/env bash
# Fuzzes rangefs's parsers of untrusted bytes with libFuzzer (docs/tests.md, "Fuzzing").
#
#   bench/fuzz.sh [SECONDS] [TARGET...]      run each target (all by default) for SECONDS (default 600), one at a time
#   bench/fuzz.sh --build [TARGET...]        only build
#   bench/fuzz.sh --list                     the targets
#   FUZZ_INPUT_TIMEOUT=S bench/fuzz.sh ...   an input taking longer than S seconds (default 10) is a finding
#
# Each target is Tests/Fuzz/<Target>.swift, a harness linked against the core's layers compiled here with
# `-sanitize=fuzzer,address` (SwiftPM never sees these files: no target's path includes Tests/Fuzz). The seeds are
# Tests/Fuzz/seeds/<Target>/ (in git); the corpus libFuzzer grows is .build-fuzz/corpus/<Target>/ (not in git);
# crashes land in .build-fuzz/crashes/<Target>/. A crash once fixed goes to Tests/Fuzz/regressions/<Target>/, which
# FuzzRegressionTests replays in the ordinary test suite. Runs under `nice -n 19`: the machine is shared.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.build-fuzz"
export PATH="/opt/swift/usr/bin:$PATH"
targets_all=(ListingHTML ListingJSON ContentRange DigestHeader SumsFile CacheRecords SavedSet ObjectListingXML ResponseHead ResponseHeadChecks Redaction MetaBlock ListingRecords
             ArchiveZip ArchiveTar ArchiveISO)

seconds=600
build_only=0
case "${1:-}" in
    --list) printf '%s\n' "${targets_all[@]}"; exit 0 ;;
    --build) build_only=1; shift ;;
    ''|*[!0-9]*) ;;
    *) seconds=$1; shift ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${targets_all[@]}")
for target in "${targets[@]}"; do
    [ -f "$root/Tests/Fuzz/$target.swift" ] \
        || { echo "fuzz.sh: no target '$target' (Tests/Fuzz/$target.swift); see --list" >&2; exit 2; }
done

# swift-log, as SwiftPM checked it out (run `swift build` once first).
log_sources="${SWIFT_LOG_SOURCES:-$root/.build/checkouts/swift-log/Sources/Logging}"
[ -d "$log_sources" ] || {
    echo "fuzz.sh: swift-log not found at $log_sources: run 'swift build' first or set SWIFT_LOG_SOURCES" >&2; exit 2; }

mkdir -p "$out/modules/CChecksum" "$out/modules/CLinux" "$out/obj"
# The core's layers, bottom up (Package.swift): each is its own module, built against the ones before it.
core_layers=(RangeFSSystem RangeFSObjectStore RangeFSCache RangeFSCatalog RangeFSFetch RangeFSArchives RangeFSFileSystem RangeFSControl)
core_dirs=() core_objects=()
for layer in "${core_layers[@]}"; do core_dirs+=("$root/Sources/$layer"); core_objects+=("$out/obj/$layer.o"); done
stamp="$out/obj/core.stamp"
# Rebuild the instrumented core when a core source is newer than the last build.
newer=$(find "${core_dirs[@]}" "$root/Sources/RangeFSPlatform" "$root/Sources/CChecksum" "$root/Sources/CLinux" -newer "$stamp" -type f \
    2>/dev/null | head -1 || true)  # no stamp yet: find fails, and the build below runs
if [ ! -f "$stamp" ] || [ -n "$newer" ]; then
    echo "fuzz.sh: building the instrumented core (${core_layers[*]})" >&2
    for module in CChecksum CLinux; do
        printf 'module %s {\n    umbrella header "%s"\n    export *\n}\n' "$module" \
            "$root/Sources/$module/include/$module.h" > "$out/modules/$module/module.modulemap"
    done
    clang -O1 -fPIC -c "$root/Sources/CChecksum/crc32c.c" -I "$root/Sources/CChecksum/include" -o "$out/obj/crc32c.o"
    clang -O1 -fPIC -c "$root/Sources/CLinux/linux.c" -I "$root/Sources/CLinux/include" -o "$out/obj/linux.o"
    clang -O1 -fPIC -c "$root/Sources/CLinux/passthrough.c" -I "$root/Sources/CLinux/include" \
        -o "$out/obj/passthrough.o"
    # swift-log: not fuzzed, only linked.
    (cd "$out/obj" && nice -n 19 swiftc -parse-as-library -module-name Logging -package-name swift_log -O -c \
        -emit-module -emit-module-path "$out/Logging.swiftmodule" -wmo $(find "$log_sources" -name '*.swift' | sort) \
        -o "$out/obj/Logging.o")
    # RangeFSPlatform (threads, formatting, percent-decoding): the core's one Swift dependency of ours.
    # shellcheck disable=SC2046
    (cd "$out/obj" && nice -n 19 swiftc -parse-as-library -module-name RangeFSPlatform -package-name rangefs \
        -swift-version 6 -O -wmo -c -sanitize=fuzzer,address -emit-module \
        -emit-module-path "$out/RangeFSPlatform.swiftmodule" -I "$out/modules/CLinux" \
        $(find "$root/Sources/RangeFSPlatform" -name '*.swift' | sort) -o "$out/obj/RangeFSPlatform.o")
    for layer in "${core_layers[@]}"; do
        # shellcheck disable=SC2046
        (cd "$out/obj" && nice -n 19 swiftc -parse-as-library -module-name "$layer" -package-name rangefs \
            -swift-version 6 -O \
            -enable-testing -wmo -c \
            -sanitize=fuzzer,address -emit-module -emit-module-path "$out/$layer.swiftmodule" \
            -I "$out" -I "$out/modules/CChecksum" -I "$out/modules/CLinux" -I "$root/Sources/CCrypto" \
            -I "$root/Sources/CZlib" $(find "$root/Sources/$layer" -name '*.swift' | sort) -o "$out/obj/$layer.o")
    done
    touch "$stamp"
fi

for target in "${targets[@]}"; do
    binary="$out/$target"
    if [ ! -x "$binary" ] || [ "$root/Tests/Fuzz/$target.swift" -nt "$binary" ] || [ "$stamp" -nt "$binary" ] \
        || [ "$root/Tests/Fuzz/FuzzSupport.swift" -nt "$binary" ] \
        || [ "$root/Tests/RangeFSTestSupport/FuzzProperties.swift" -nt "$binary" ] \
        || [ "$root/Tests/RangeFSTestSupport/ArchiveFuzzProperties.swift" -nt "$binary" ]; then
        echo "fuzz.sh: building $target" >&2
        nice -n 19 swiftc -parse-as-library -O -sanitize=fuzzer,address -module-name "Fuzz$target" -package-name rangefs \
            -I "$out" -I "$out/modules/CChecksum" -I "$out/modules/CLinux" -I "$root/Sources/CCrypto" \
            -I "$root/Sources/CZlib" \
            "$root/Tests/Fuzz/FuzzSupport.swift" "$root/Tests/RangeFSTestSupport/FuzzProperties.swift" \
            "$root/Tests/RangeFSTestSupport/ArchiveFuzzProperties.swift" \
            "$root/Tests/Fuzz/$target.swift" \
            "${core_objects[@]}" "$out/obj/RangeFSPlatform.o" "$out/obj/Logging.o" "$out/obj/crc32c.o" "$out/obj/linux.o" \
            "$out/obj/passthrough.o" -lcrypto -lz -o "$binary" 2> "$out/$target.build.log" \
            || { cat "$out/$target.build.log" >&2; exit 1; }  # on success only gold's noise about ASan's symbols
    fi
done
[ $build_only = 1 ] && exit 0

failed=0
for target in "${targets[@]}"; do
    corpus="$out/corpus/$target" crashes="$out/crashes/$target"
    mkdir -p "$corpus" "$crashes"
    echo "fuzz.sh: $target for ${seconds}s" >&2
    # -rss_limit_mb: a parser that balloons on a small input is a finding too. A crash stops the run of this
    # target (the input is in $crashes) and the script goes on to the next one.
    status=0
    # Swift's own crash backtracer would race ASan's report; libFuzzer's is the one wanted. Leak checks are off:
    # the Swift runtime keeps its metadata caches for the process's life, which LeakSanitizer reports as leaks.
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" nice -n 19 "$out/$target" \
        -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 -timeout="${FUZZ_INPUT_TIMEOUT:-10}" \
        -artifact_prefix="$crashes/" "$corpus" "$root/Tests/Fuzz/seeds/$target" \
        2> "$out/$target.log" || status=$?
    grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec|^stat::peak_rss_mb|^Done|SUMMARY|ERROR' \
        "$out/$target.log" | sed "s/^/$target: /" || true
    [ $status = 0 ] || { echo "$target: FAILED (exit $status); see $out/$target.log and $crashes" >&2; failed=1; }
done
exit $failed
