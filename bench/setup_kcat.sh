#!/usr/bin/env bash
# Builds kcat against a recent librdkafka for bench/kafka.py. Debian's kcat 1.7 links
# librdkafka 2.0, which cannot talk to the test broker (Tansu); the librdkafka here is the
# one cargo already vendors for Ferry (crate rdkafka-sys, 2.12 at the time of writing), so
# kcat and Ferry's Kafka connector run the same client library.
#
# Idempotent: does nothing when $KCAT_PREFIX/bin/kcat already runs (delete that folder
# to rebuild). Downloads nothing but Debian's kcat source package and, when cargo has not
# fetched it yet, the rdkafka-sys crate (`cargo fetch`).
#
#   KCAT_PREFIX       where it installs (default ~/.cache/ferry/kcat; kcat is bin/kcat)
#   KCAT_SRC          a kcat source tree or git directory to build instead of Debian's
#                     kafkacat source package (1.7.1)
#   LIBRDKAFKA_SRC    a librdkafka source tree instead of the one in cargo's registry
#   JOBS              make's parallelism (default 1)
#
# librdkafka is built without SSL, SASL/GSSAPI, zstd and libcurl (the benchmark broker is
# plaintext and uncompressed); zlib, snappy and LZ4 (built in) stay. kcat links it statically
# and has no Avro and no JSON (-J) unless libyajl-dev is installed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${KCAT_PREFIX:-$HOME/.cache/ferry/kcat}"
jobs="${JOBS:-1}"

if "$prefix/bin/kcat" -V >/dev/null 2>&1; then
    echo "setup_kcat: $prefix/bin/kcat is built: $("$prefix/bin/kcat" -V | grep -m1 Version)"
    exit 0
fi
start=$(date +%s)

# ---- build tools (a fresh Debian 12 has gcc, maybe not the rest)
need=()
command -v make >/dev/null || need+=(make)
command -v gcc >/dev/null || need+=(gcc)
command -v pkg-config >/dev/null || need+=(pkg-config)
dpkg-query -W -f='${Status}' zlib1g-dev 2>/dev/null | grep -q 'ok installed' || need+=(zlib1g-dev)
if ((${#need[@]})); then
    echo "setup_kcat: installing ${need[*]}"
    sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

build="$(mktemp -d "${TMPDIR:-/tmp}/ferry-kcat.XXXXXX")"
trap 'rm -rf "$build"' EXIT
logged() { # log, command...: runs it quietly, shows the log's end when it fails
    local log="$build/$1"; shift
    "$@" >>"$log" 2>&1 || { tail -30 "$log" >&2; echo "setup_kcat: failed: $*" >&2; exit 1; }
}

# ---- librdkafka: a copy of cargo's vendored source (never built inside the registry)
lrk="${LIBRDKAFKA_SRC:-}"
if [ -z "$lrk" ]; then
    # The rdkafka-sys that Cargo.lock names (else the newest one in the registry).
    ver=$(awk '$0 == "name = \"rdkafka-sys\"" {getline; gsub(/.*= "|"/, ""); print}' \
        "$repo/Cargo.lock" 2>/dev/null || true)
    find_lrk() {
        local reg="${CARGO_HOME:-$HOME/.cargo}/registry/src"
        { if [ -n "$ver" ]; then ls -d "$reg"/*/rdkafka-sys-"$ver"/librdkafka || true; fi
          ls -d "$reg"/*/rdkafka-sys-*/librdkafka | sort -rV || true; } 2>/dev/null | sed -n 1p
    }
    lrk="$(find_lrk)"
    if [ -z "$lrk" ]; then
        echo "setup_kcat: fetching the rdkafka-sys crate (cargo fetch)"
        (cd "$repo" && cargo fetch --quiet)
        lrk="$(find_lrk)"
    fi
    [ -n "$lrk" ] || { echo "setup_kcat: no rdkafka-sys source in cargo's registry" >&2; exit 1; }
fi
echo "setup_kcat: librdkafka from $lrk"
cp -r "$lrk" "$build/librdkafka"
chmod -R u+w "$build/librdkafka"

# ---- kcat's source: KCAT_SRC, else Debian's source package (apt, with a deb-src list of
# its own: the machine's apt configuration is left alone)
mkdir -p "$build/kcat"
if [ -n "${KCAT_SRC:-}" ]; then
    echo "setup_kcat: kcat from $KCAT_SRC"
    if [ -f "$KCAT_SRC/kcat.c" ]; then
        cp -r "$KCAT_SRC/." "$build/kcat/"
    else
        git --git-dir="$KCAT_SRC" archive HEAD | tar -x -C "$build/kcat"
    fi
else
    apt_dir="$build/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts" "$apt_dir/src"
    cat > "$apt_dir/parts/debian-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt_opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt_dir/parts"
              -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache"
              -o APT::Sandbox::User="$(id -un)")
    echo "setup_kcat: kcat from Debian's source package kafkacat"
    logged apt.log apt-get "${apt_opts[@]}" update
    # Only the upstream tarball is needed; apt checks its hash against the signed index.
    # (The Debian patch tarball is not used, and a mirror that lacks it is no failure.)
    (cd "$apt_dir/src" && apt-get "${apt_opts[@]}" source --download-only kafkacat) \
        >>"$build/apt.log" 2>&1 || true
    orig=$(ls "$apt_dir"/src/kafkacat_*.orig.tar.gz 2>/dev/null | head -1)
    dsc=$(ls "$apt_dir"/src/kafkacat_*.dsc 2>/dev/null | head -1)
    if [ -z "$orig" ] || [ -z "$dsc" ]; then
        tail -30 "$build/apt.log" >&2
        echo "setup_kcat: no kafkacat source from apt" >&2
        exit 1
    fi
    want=$(awk -v f="$(basename "$orig")" \
        '/^Checksums-Sha256:/ {s=1; next} /^[^ ]/ {s=0} s && $3 == f {print $1}' "$dsc")
    got=$(sha256sum "$orig" | cut -d' ' -f1)
    [ -n "$want" ] && [ "$want" = "$got" ] ||
        { echo "setup_kcat: $orig does not match $dsc" >&2; exit 1; }
    tar -xzf "$orig" -C "$build/kcat" --strip-components=1
fi

# ---- build librdkafka (the C library only: no C++ binding, examples or docs)
echo "setup_kcat: building librdkafka into $prefix (make -j$jobs)"
(
    cd "$build/librdkafka"
    logged librdkafka.log ./configure --prefix="$prefix" --no-download --disable-ssl \
        --disable-gssapi --disable-zstd --disable-curl --disable-lz4-ext --enable-zlib
    logged librdkafka.log make -C src -j"$jobs"
    logged librdkafka.log make -C src install
)

# ---- build kcat, linked with librdkafka-static.a (kcat's configure prefers rdkafka-static)
echo "setup_kcat: building kcat"
(
    cd "$build/kcat"
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export CPPFLAGS="-I$prefix/include ${CPPFLAGS:-}"
    export LDFLAGS="-L$prefix/lib -Wl,-rpath,$prefix/lib ${LDFLAGS:-}"
    logged kcat.log ./configure --prefix="$prefix" --no-download --disable-avro
    logged kcat.log make -j"$jobs"
    mkdir -p "$prefix/bin"
    install -m 0755 kcat "$prefix/bin/kcat"
)

"$prefix/bin/kcat" -V | grep -m1 Version
if ldd "$prefix/bin/kcat" | grep -q librdkafka; then
    echo "setup_kcat: note: kcat links librdkafka dynamically (rpath $prefix/lib)"
fi
echo "setup_kcat: built $prefix/bin/kcat in $(( $(date +%s) - start )) s"
