import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import net.jpountz.lz4.LZ4BlockInputStream;
import net.jpountz.lz4.LZ4BlockOutputStream;

/**
 * Writes N5 datasets compressed with lz4 the way N5's Lz4Compression does:
 * each block's data goes through lz4-java's
 * {@code new LZ4BlockOutputStream(out, blockSize)} (blockSize from the
 * compression attributes, 65536 by default), closed at the end so that
 * finish() writes the empty end frame. N5 itself is not on Maven Central,
 * so the dataset layout is written here as N5 writes it: attributes.json
 * ({"dimensions", "blockSize", "dataType", "compression": {"type": "lz4",
 * "blockSize"}}), one file per block at x/y/z, each N5's default block
 * header (mode 0 as a big-endian short, the number of dimensions as a
 * short, the block's dimensions, fastest first, as big-endian ints; an edge
 * block is cut to the dataset), then the compressed big-endian elements.
 *
 * Also writes expected.json: each dataset's shape (z, y, x), dtype and the
 * sha256 of its voxels as package zarr's tests hash them (float32
 * little-endian, z-y-x C order, NaN as 0x7fc00000), with a few voxels.
 */
public class MakeN5Lz4 {

	interface Value {
		double at(int x, int y, int z);
	}

	static final StringBuilder expected = new StringBuilder();

	public static void main(String[] args) throws Exception {
		File out = new File(args[0]);
		List<String> entries = new ArrayList<>();

		// uint16: 3x1x2 blocks of 48x40x20 (76800 bytes: two LZ4Block
		// frames at the default 65536), cut to 4 along x and 6 along z at
		// the edge; block (2,0,1) is random, so its frame is RAW.
		entries.add(write(new File(out, "u2.n5"), "uint16", new int[] {100, 40, 26}, new int[] {48, 40, 20}, -1,
				(x, y, z) -> (x / 12 + 3 * (y / 8) + 7 * z) % 1000, new int[] {2, 0, 1}, 42));

		// float32 with lz4 blockSize 1024 (frames of 1 KiB, token level 0):
		// 2x2x3 blocks of 16x16x4, cut at every far edge; NaN, -0 and
		// infinities in place; block (1,0,1) random, its frames RAW.
		entries.add(write(new File(out, "f4.n5"), "float32", new int[] {30, 20, 9}, new int[] {16, 16, 4}, 1024,
				(x, y, z) -> {
					if (x == 3 && y == 2 && z == 1) return Double.NaN;
					if (x == 29 && y == 19 && z == 8) return Double.POSITIVE_INFINITY;
					if (x == 0 && y == 19 && z == 0) return Double.NEGATIVE_INFINITY;
					if (x == 5 && y == 5 && z == 5) return -0.0;
					return (x / 3) * 0.5 - (y / 4) * 1.25 + z;
				}, new int[] {1, 0, 1}, 7));

		Files.write(new File(out, "expected.json").toPath(),
				("{\n \"writer\": \"lz4-java 1.8.0 LZ4BlockOutputStream (gen/MakeN5Lz4.java)\",\n \"fixtures\": [\n"
						+ String.join(",\n", entries) + "\n ]\n}\n").getBytes(StandardCharsets.UTF_8));
	}

	/**
	 * Writes one dataset; dims and block are N5's (x, y, z). lz4BlockSize
	 * -1 is Lz4Compression's default (1 << 16). Block randomBlock holds
	 * random values from seed instead of f's.
	 */
	static String write(File dir, String dataType, int[] dims, int[] block, int lz4BlockSize, Value f,
			int[] randomBlock, long seed) throws Exception {
		int bs = lz4BlockSize < 0 ? 1 << 16 : lz4BlockSize;
		boolean isFloat = dataType.equals("float32");
		int elem = isFloat ? 4 : 2;
		dir.mkdirs();
		String attrs = "{\"dimensions\":[" + dims[0] + "," + dims[1] + "," + dims[2] + "],\"blockSize\":[" + block[0]
				+ "," + block[1] + "," + block[2] + "],\"dataType\":\"" + dataType
				+ "\",\"compression\":{\"type\":\"lz4\",\"blockSize\":" + bs + "}}";
		Files.write(new File(dir, "attributes.json").toPath(), attrs.getBytes(StandardCharsets.UTF_8));

		// The values as written (float32 here: exact for uint16), z-y-x.
		float[] vox = new float[dims[0] * dims[1] * dims[2]];
		Random rnd = new Random(seed);
		int nb[] = new int[3];
		for (int d = 0; d < 3; d++)
			nb[d] = (dims[d] + block[d] - 1) / block[d];
		for (int bz = 0; bz < nb[2]; bz++)
			for (int by = 0; by < nb[1]; by++)
				for (int bx = 0; bx < nb[0]; bx++) {
					int[] o = {bx * block[0], by * block[1], bz * block[2]};
					int[] s = new int[3];
					for (int d = 0; d < 3; d++)
						s[d] = Math.min(block[d], dims[d] - o[d]);
					boolean random = bx == randomBlock[0] && by == randomBlock[1] && bz == randomBlock[2];
					ByteBuffer data = ByteBuffer.allocate(s[0] * s[1] * s[2] * elem).order(ByteOrder.BIG_ENDIAN);
					for (int z = 0; z < s[2]; z++)
						for (int y = 0; y < s[1]; y++)
							for (int x = 0; x < s[0]; x++) {
								int gx = o[0] + x, gy = o[1] + y, gz = o[2] + z;
								float v;
								if (isFloat) {
									v = random ? rnd.nextFloat() * 2 - 1 : (float) f.at(gx, gy, gz);
									data.putFloat(v);
								} else {
									int u = random ? rnd.nextInt(65536) : (int) f.at(gx, gy, gz);
									data.putShort((short) u);
									v = u;
								}
								vox[(gz * dims[1] + gy) * dims[0] + gx] = v;
							}
					ByteArrayOutputStream bytes = new ByteArrayOutputStream();
					DataOutputStream dos = new DataOutputStream(bytes);
					dos.writeShort(0); // mode: default
					dos.writeShort(3);
					for (int d = 0; d < 3; d++)
						dos.writeInt(s[d]);
					dos.flush();
					// As Lz4Compression.encode: new LZ4BlockOutputStream(out, blockSize).
					OutputStream lz = new LZ4BlockOutputStream(bytes, bs);
					lz.write(data.array());
					lz.close();
					byte[] file = bytes.toByteArray();
					check(file, data.array());
					File bf = new File(dir, bx + "/" + by + "/" + bz);
					bf.getParentFile().mkdirs();
					Files.write(bf.toPath(), file);
				}

		MessageDigest sha = MessageDigest.getInstance("SHA-256");
		ByteBuffer le = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
		for (float v : vox) {
			le.clear();
			le.putInt(Float.floatToIntBits(v)); // canonical NaN, 0x7fc00000
			sha.update(le.array());
		}
		StringBuilder hex = new StringBuilder();
		for (byte b : sha.digest())
			hex.append(String.format("%02x", b));
		int[][] at = {{0, 0, 0}, {1, 2, 3}, {5, 5, 5}, {dims[2] - 1, dims[1] - 1, dims[0] - 1},
				{randomBlock[2] * block[2], randomBlock[1] * block[1], randomBlock[0] * block[0]}};
		List<String> samples = new ArrayList<>();
		for (int[] p : at) {
			float v = vox[(p[0] * dims[1] + p[1]) * dims[0] + p[2]];
			String vs = Float.isNaN(v) ? "\"NaN\"" : Float.isInfinite(v) ? (v > 0 ? "\"Inf\"" : "\"-Inf\"") : Float.toString(v);
			samples.add("{\"at\": [" + p[0] + ", " + p[1] + ", " + p[2] + "], \"value\": " + vs + "}");
		}
		return "  {\"path\": \"" + dir.getName() + "\", \"dtype\": \"" + dataType + "\", \"shape\": [" + dims[2] + ", "
				+ dims[1] + ", " + dims[0] + "], \"lz4_block_size\": " + bs + ",\n   \"sha256\": \"" + hex
				+ "\",\n   \"voxels\": [" + String.join(", ", samples) + "]}";
	}

	/** Reads the block back through LZ4BlockInputStream, as N5 would. */
	static void check(byte[] file, byte[] want) throws IOException {
		DataInputStream in = new DataInputStream(new ByteArrayInputStream(file));
		in.readShort();
		int n = in.readShort();
		for (int i = 0; i < n; i++)
			in.readInt();
		byte[] got = new LZ4BlockInputStream(in).readAllBytes();
		if (!java.util.Arrays.equals(got, want))
			throw new AssertionError("block does not read back");
	}
}
