# Minimal NIfTI-1 .nii.gz editor (no nibabel): zeros / half / negspacing.
import gzip, struct, sys
path, op = sys.argv[1], sys.argv[2]
b = bytearray(gzip.open(path).read())
off = int(struct.unpack('<f', b[108:112])[0])
dt = struct.unpack('<h', b[70:72])[0]
if op == 'zeros':
    for i in range(off, len(b)): b[i] = 0
elif op == 'half':
    # make the label float32: rewrite datatype 16, bitpix 32, data as floats (value+0.5 where >0)
    sizes = {2:1,4:2,8:4,16:4,512:2,256:1}
    n = (len(b)-off)//sizes[dt]
    fmt = {2:'B',4:'h',8:'i',16:'f',512:'H',256:'b'}[dt]
    vals = struct.unpack('<%d%s' % (n, fmt), bytes(b[off:off+n*sizes[dt]]))
    vals = [v + 0.5 if v > 0 else 0.0 for v in vals]
    b[70:72] = struct.pack('<h', 16); b[72:74] = struct.pack('<h', 32)
    b[112:116] = struct.pack('<f', 0.0)  # scl_slope 0
    b = b[:off] + bytearray(struct.pack('<%df' % n, *vals))
elif op == 'negspacing':
    b[80:84] = struct.pack('<f', -abs(struct.unpack('<f', b[80:84])[0]))
gzip.open(path, 'wb').write(bytes(b))
