// The forced band (src/press/press.h, vkv_press_forced_score): a token kept
// whatever the others score (SnapKV's observation window) of order i among
// them (0 the oldest) scores 2^100 (1 + i 2^-23), bits 0x71800000 + i: above
// every real score, the newest highest.

const uint PRESS_FORCED_BITS = 0x71800000u;

float press_forced_score(uint order) { return uintBitsToFloat(PRESS_FORCED_BITS + order); }

// A forced keep: the band, or +inf.
bool press_is_forced(float score) { return score >= uintBitsToFloat(PRESS_FORCED_BITS); }
