#!/bin/sh
# Writes zarr's N5 lz4 fixtures (u2.n5, f4.n5, expected.json) into this
# directory with lz4-java's LZ4BlockOutputStream, as N5's Lz4Compression
# does. N5 (org.janelia.saalfeldlab:n5) is not on Maven Central, so
# MakeN5Lz4 writes the dataset layout itself: attributes.json and block
# files with N5's default block header (see MakeN5Lz4.java).
# Needs java 17 and mvn; run from anywhere: sh make_fixtures.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/gen"
mvn -q -B compile dependency:copy-dependencies
rm -rf "$here/u2.n5" "$here/f4.n5"
java -ea -cp "target/classes:target/dependency/*" MakeN5Lz4 "$here"
rm -rf target
