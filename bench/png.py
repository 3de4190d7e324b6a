"""A tiny PNG writer for benchmark plots: an RGB canvas, rectangles, lines and a 5x7 bitmap font.

No plotting library is a dependency of Scalar, so plots are drawn here: ``Canvas`` holds the pixels,
``Canvas.save`` writes a valid 8-bit RGB PNG (zlib-compressed scanlines, CRC-checked chunks) with only
the standard library. Text is upper-case (lower-case letters are drawn as capitals).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

Color = tuple[int, int, int]
WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)
GREY: Color = (200, 200, 200)

# 5x7 glyphs, one string of 7 rows of 5 bits each ("#" on, "." off).
_GLYPHS: dict[str, str] = {
    "A": ".###.#...##...#######...##...##...#",
    "B": "####.#...##...#####.#...##...#####.",
    "C": ".###.#...##....#....#....#...#.###.",
    "D": "####.#...##...##...##...##...#####.",
    "E": "######....#....####.#....#....#####",
    "F": "######....#....####.#....#....#....",
    "G": ".###.#...##....#.####...##...#.####",
    "H": "#...##...##...#######...##...##...#",
    "I": ".###...#....#....#....#....#...###.",
    "J": "..###...#....#....#....##..#..##...",
    "K": "#...##..#.#.#..##...#.#..#..#.#...#",
    "L": "#....#....#....#....#....#....#####",
    "M": "#...###.###.#.##...##...##...##...#",
    "N": "#...###..##.#.##..###...##...##...#",
    "O": ".###.#...##...##...##...##...#.###.",
    "P": "####.#...##...#####.#....#....#....",
    "Q": ".###.#...##...##...##.#.##..#..##.#",
    "R": "####.#...##...#####.#.#..#..#.#...#",
    "S": ".####.....#.....###.....#....#####.",
    "T": "#####..#....#....#....#....#....#..",
    "U": "#...##...##...##...##...##...#.###.",
    "V": "#...##...##...##...##...#.#.#...#..",
    "W": "#...##...##...##.#.##.#.##.#.#.#.#.",
    "X": "#...##...#.#.#...#...#.#.#...##...#",
    "Y": "#...##...#.#.#...#....#....#....#..",
    "Z": "#####....#...#...#...#...#....#####",
    "0": ".###.#...##..###.#.###..##...#.###.",
    "1": "..#...##....#....#....#....#...###.",
    "2": ".###.#...#....#...#...#...#...#####",
    "3": "#####...#...#.....#.....##...#.###.",
    "4": "...#...##..#.#.#..#.#####...#....#.",
    "5": "######....####.....#....##...#.###.",
    "6": "..##..#...#....####.#...##...#.###.",
    "7": "#####....#...#...#...#....#....#...",
    "8": ".###.#...##...#.###.#...##...#.###.",
    "9": ".###.#...##...#.####....#...#..##..",
    "$": "..#...####.#...###...#.#####...#...",
    ".": "..............................##...",
    ",": "......................##...##..#...",
    "-": "................###................",
    ":": ".....##...##..........##...##......",
    "%": "##...##..#...#...#...#...#..##...##",
    "/": ".........#...#...#...#...#.........",
    "(": "...#...#...#....#....#.....#.....#.",
    ")": ".#.....#.....#....#....#...#...#...",
    "<": "....#...#...#...#.....#.....#.....#",
    "=": "..........#####.....#####..........",
    " ": "...................................",
}


class Canvas:
    """An RGB image, white to start with."""

    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(bytes(background) * (width * height))

    def set(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i : i + 3] = bytes(color)

    def get(self, x: int, y: int) -> Color:
        i = 3 * (y * self.width + x)
        return (self.pixels[i], self.pixels[i + 1], self.pixels[i + 2])

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the rectangle from (x0, y0) to (x1, y1), both included, clipped to the canvas."""
        xa, xb = sorted((x0, x1))
        ya, yb = sorted((y0, y1))
        xa, xb = max(0, xa), min(self.width - 1, xb)
        for y in range(max(0, ya), min(self.height - 1, yb) + 1):
            start = 3 * (y * self.width + xa)
            self.pixels[start : start + 3 * (xb - xa + 1)] = bytes(color) * (xb - xa + 1)

    def hline(self, x0: int, x1: int, y: int, color: Color) -> None:
        self.rect(x0, y, x1, y, color)

    def vline(self, x: int, y0: int, y1: int, color: Color) -> None:
        self.rect(x, y0, x, y1, color)

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 1) -> int:
        """Draw ``text`` with its top-left corner at (x, y); returns the x after the last glyph."""
        for ch in text.upper():
            glyph = _GLYPHS.get(ch) or _GLYPHS[" "]
            for row in range(7):
                for col in range(5):
                    k = row * 5 + col
                    if k < len(glyph) and glyph[k] == "#":
                        self.rect(
                            x + col * scale,
                            y + row * scale,
                            x + col * scale + scale - 1,
                            y + row * scale + scale - 1,
                            color,
                        )
            x += 6 * scale
        return x

    @staticmethod
    def text_width(text: str, scale: int = 1) -> int:
        return 6 * scale * len(text) - scale if text else 0

    def encode(self) -> bytes:
        """The image as PNG bytes (8-bit RGB, no interlace, filter 0 on every row)."""
        stride = 3 * self.width
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * stride : (y + 1) * stride]) for y in range(self.height)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )

    def save(self, path: Path | str) -> None:
        Path(path).write_bytes(self.encode())


def decode_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG (reads the IHDR chunk; for tests)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)
