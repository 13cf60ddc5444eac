#!/usr/bin/env python3
# Turn the helper's .beam into a C array (libsample/meson.build).
import sys

data = open(sys.argv[1], 'rb').read()
with open(sys.argv[2], 'w') as out:
    out.write('/* generated from %s by beam-to-c.py */\n' % sys.argv[1].split('/')[-1])
    out.write('#include <stddef.h>\n\n')
    out.write('extern const unsigned char fp_helper_beam[];\n')
    out.write('extern const size_t fp_helper_beam_len;\n\n')
    out.write('const unsigned char fp_helper_beam[] = {\n')
    for i in range(0, len(data), 12):
        out.write('\t' + ' '.join('0x%02x,' % b for b in data[i:i + 12]) + '\n')
    out.write('};\n\nconst size_t fp_helper_beam_len = %d;\n' % len(data))
