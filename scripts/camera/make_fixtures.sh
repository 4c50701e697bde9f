#!/usr/bin/env bash
# Regenerates the recorded camera frames that chunkrt-camera's tests decode, and
# ffmpeg's own RGB24 conversion of each, the independent oracle the tests compare
# against (crates/chunkrt-camera/tests/convert.rs).
#
#   frame.yuyv          160x120 YUYV (yuyv422), as a UVC camera sends it: BT.601,
#                       limited range
#   frame.yuyv.rgb      ffmpeg's RGB24 of it (BT.601 limited range in, chroma taken
#                       as is per pixel pair: swscale's nearest-neighbour scaler, accurate rounding)
#   frame.mjpg          160x120 baseline JPEG, 4:2:2 (as UVC cameras send MJPEG), with
#                       the standard Huffman tables of JPEG Annex K (`-huffman default`)
#   frame_nodht.mjpg    the same with its DHT segments cut out, as many UVC cameras
#                       send it: a decoder must fall back to the Annex K tables
#   frame.mjpg.rgb      ffmpeg's RGB24 of frame.mjpg (JFIF: BT.601 full range)
#
# Needs ffmpeg (apt-get install -y ffmpeg) and python3. The frames depend on the
# ffmpeg version only through testsrc2's drawing and the encoder; the tests compare
# our decoding with ffmpeg's decoding of the same bytes, so regenerate all files
# together. Made with ffmpeg 5.1 (Debian 12).
#
# Usage: ./scripts/camera/make_fixtures.sh    (from anywhere inside the repository)
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
out="$root/crates/chunkrt-camera/tests/fixtures"
mkdir -p "$out"
size=160x120
ff=(ffmpeg -hide_banner -loglevel error -y)

# YUYV: the test pattern at frame 40 (a frame with colour bars, gradient and text).
"${ff[@]}" -f lavfi -i "testsrc2=size=$size:rate=25" -vf "select=eq(n\,40)" \
    -frames:v 1 -pix_fmt yuyv422 -f rawvideo "$out/frame.yuyv"
"${ff[@]}" -f rawvideo -pix_fmt yuyv422 -s "$size" -i "$out/frame.yuyv" \
    -vf "scale=in_range=limited:in_color_matrix=bt601:flags=neighbor+accurate_rnd+full_chroma_int" \
    -pix_fmt rgb24 -f rawvideo "$out/frame.yuyv.rgb"

# MJPEG: 4:2:2, standard Huffman tables (ffmpeg's default is per-image optimal tables,
# which a DHT-less frame could not use).
"${ff[@]}" -f lavfi -i "testsrc2=size=$size:rate=25" -vf "select=eq(n\,40)" \
    -frames:v 1 -pix_fmt yuvj422p -c:v mjpeg -huffman default -q:v 4 -f mjpeg "$out/frame.mjpg"
"${ff[@]}" -f mjpeg -i "$out/frame.mjpg" \
    -vf "scale=flags=bilinear+accurate_rnd+full_chroma_int" \
    -pix_fmt rgb24 -f rawvideo "$out/frame.mjpg.rgb"

# The same JPEG without DHT: walk the marker segments up to SOS and drop each FFC4.
python3 - "$out/frame.mjpg" "$out/frame_nodht.mjpg" <<'EOF'
import sys
src = open(sys.argv[1], "rb").read()
assert src[:2] == b"\xff\xd8", "not a JPEG"
out, i = bytearray(src[:2]), 2
while True:
    assert src[i] == 0xFF, f"no marker at {i}"
    marker = src[i + 1]
    length = int.from_bytes(src[i + 2:i + 4], "big")
    if marker == 0xDA:  # SOS: the rest is entropy-coded data and EOI
        out += src[i:]
        break
    if marker != 0xC4:
        out += src[i:i + 2 + length]
    i += 2 + length
assert b"\xff\xc4" not in out[:out.index(b"\xff\xda")], "a DHT is left"
open(sys.argv[2], "wb").write(out)
print(f"frame_nodht.mjpg: {len(src)} -> {len(out)} bytes")
EOF

ls -l "$out"
du -cb "$out"/* | tail -1
