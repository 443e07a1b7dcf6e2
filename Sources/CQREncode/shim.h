// libqrencode, the reference QREncoderTests hold authctl's own encoder to (tests only:
// Debian ships no static libqrencode.a for the static release authctl).
#include <qrencode.h>
