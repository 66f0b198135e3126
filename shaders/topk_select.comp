#version 450
// Top-k selection per row: mask[r, j] = 1 for the k_r largest scores of row r,
// 0 elsewhere; ties are broken by position (the lower index wins), NaN ranks
// as -inf, -0 as +0 (the order of src/ref/ref_select.c). One workgroup per row.
//
// Radix select on an order-preserving uint key of the float, 4 passes of 8
// bits from the most significant digit: each pass histograms (shared memory,
// atomics) the digit of the elements whose higher digits match the ones
// chosen so far, and picks the digit where the k-th largest lies. Every pass
// streams the row, so nothing of size n is ever held and any row length works.
// After the 4 passes T is the exact key of the k-th largest element and
// `need` is how many elements equal to T belong to the selection. The last
// pass selects every key > T and the `need` earliest keys == T: when all of
// them are needed (the usual case for real-valued scores) that is a plain
// key >= T; otherwise each thread counts the ties in a contiguous segment of
// the row and an exclusive scan over the segments tells each thread how many
// ties precede its segment.
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Sbuf { float s[]; };     // [rows of this dispatch, n] scores
layout(binding = 1) readonly buffer Kbuf { uint kbuf[]; };   // [all rows] k per row (when use_k_buf)
layout(binding = 2) writeonly buffer Mbuf { uint mask[]; };  // [rows of this dispatch, n] 1 = selected

layout(push_constant) uniform PC {
    uint rows;       // rows of this dispatch
    uint n;          // elements per row
    uint k_uniform;  // k of every row when use_k_buf == 0
    uint use_k_buf;
    uint row0;       // index of this dispatch's row 0 in kbuf
    uint groups_x;   // workgroups along x (rows are spread over x and y)
} pc;

const uint NBINS = 256u;
shared uint hist[NBINS];  // digit histogram of this pass
shared uint acc[NBINS];   // suffix sums of hist; later the per-segment tie counts and their scan
shared uint tmp[NBINS];   // scan scratch
shared uint sel_digit, sel_above;

// Order-preserving key: a > b as floats <=> key(a) > key(b) as uints.
uint key_of(float x)
{
    uint u = floatBitsToUint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) u = 0xff800000u; // NaN -> -inf (bit test: immune to fast-math)
    if (u == 0x80000000u) u = 0u;                          // -0 -> +0
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// acc[b] += acc[b + off] (suffix) or acc[b - off] (prefix) for off = 1, 2, 4, ...:
// an inclusive Hillis-Steele scan over the NBINS entries of acc.
void scan_acc(bool suffix)
{
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    for (uint off = 1u; off < NBINS; off <<= 1) {
        for (uint b = tid; b < NBINS; b += wg) {
            uint other = suffix ? (b + off < NBINS ? acc[b + off] : 0u) : (b >= off ? acc[b - off] : 0u);
            tmp[b] = acc[b] + other;
        }
        barrier();
        for (uint b = tid; b < NBINS; b += wg) acc[b] = tmp[b];
        barrier();
    }
}

void main()
{
    const uint r = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
    if (r >= pc.rows) return; // whole workgroup: no barrier is skipped by part of it
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint base = r * pc.n;
    const uint k = pc.use_k_buf != 0u ? kbuf[pc.row0 + r] : pc.k_uniform;
    if (k == 0u || k >= pc.n) {
        const uint v = k == 0u ? 0u : 1u;
        for (uint j = tid; j < pc.n; j += wg) mask[base + j] = v;
        return;
    }

    uint prefix = 0u;  // digits of T found so far (lower bits 0)
    uint need = k;     // rank of T among the elements that match `prefix`
    uint n_equal = 0u; // after the last pass: elements whose key == T
    [[unroll]] for (uint pass = 0u; pass < 4u; pass++) {
        const uint shift = 24u - 8u * pass;
        const uint hi = pass == 0u ? 0u : 0xffffffffu << (shift + 8u); // digits already fixed
        for (uint b = tid; b < NBINS; b += wg) hist[b] = 0u;
        barrier();
        for (uint j = tid; j < pc.n; j += wg) {
            const uint key = key_of(s[base + j]);
            if ((key & hi) == prefix) atomicAdd(hist[(key >> shift) & 0xffu], 1u);
        }
        barrier();
        for (uint b = tid; b < NBINS; b += wg) acc[b] = hist[b];
        barrier();
        scan_acc(true); // acc[b] = elements with this digit or a larger one
        // The digit d with acc[d+1] < need <= acc[d] holds the need-th largest.
        for (uint b = tid; b < NBINS; b += wg) {
            const uint above = acc[b] - hist[b];
            if (above < need && acc[b] >= need) {
                sel_digit = b;
                sel_above = above;
            }
        }
        barrier();
        const uint d = sel_digit;
        prefix |= d << shift;
        need -= sel_above;
        n_equal = hist[d];
        barrier(); // everyone has read hist / sel_* before the next pass rewrites them
    }
    const uint T = prefix;

    if (need == n_equal) { // every tie at T is selected
        for (uint j = tid; j < pc.n; j += wg) mask[base + j] = key_of(s[base + j]) >= T ? 1u : 0u;
        return;
    }

    // Only the `need` earliest ties: per-segment tie counts, exclusive scan.
    const uint n_seg = min(wg, NBINS);
    const uint seg = (pc.n + n_seg - 1u) / n_seg;
    const uint j0 = min(tid * seg, pc.n), j1 = tid < n_seg ? min(j0 + seg, pc.n) : j0;
    uint ties = 0u;
    for (uint j = j0; j < j1; j++) ties += key_of(s[base + j]) == T ? 1u : 0u;
    for (uint b = tid; b < NBINS; b += wg) acc[b] = 0u;
    barrier();
    if (tid < n_seg) acc[tid] = ties;
    barrier();
    scan_acc(false); // acc[t] = ties in segments 0..t
    uint before = tid < n_seg ? acc[tid] - ties : 0u;
    for (uint j = j0; j < j1; j++) {
        const uint key = key_of(s[base + j]);
        uint m = key > T ? 1u : 0u;
        if (key == T) {
            m = before < need ? 1u : 0u;
            before++;
        }
        mask[base + j] = m;
    }
}
