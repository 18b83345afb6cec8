//! The Reed-Solomon code pstore's RAM zones carry when ramoops is given
//! `ecc=` (`persistent_ram_init_ecc()`): 8-bit symbols over GF(2^8) with
//! the field polynomial 0x11d, first consecutive root 0, primitive
//! element 1, and `nroots` parity symbols per block, as the kernel's
//! `lib/reed_solomon` sets it up with `init_rs(8, 0x11d, 0, 1, nroots)`.
//!
//! A block of `len` data bytes is the tail of a 255-symbol codeword whose
//! leading `255 - nroots - len` symbols are zero; its parity follows the
//! data, highest power first. Decoding finds the syndromes, the error
//! locator (Berlekamp-Massey), its roots (Chien search) and the error
//! values (Forney), then checks that the errors found explain the
//! syndromes before it corrects anything: a block it cannot correct is
//! left as it was, as `decode_rs8()` leaves it.

use thiserror::Error;

/// Symbols in a codeword: 2^8 - 1.
const NN: usize = 255;
/// `0x11d`: x^8 + x^4 + x^3 + x^2 + 1.
const FIELD_POLY: usize = 0x11d;
/// The index-form zero (log of 0).
const A0: usize = NN;

/// More errors than the parity can locate: nothing was changed.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("uncorrectable")]
pub struct Uncorrectable;

/// A code with `nroots` parity symbols.
pub struct Codec {
    nroots: usize,
    /// alpha^i, and 0 at [`A0`].
    alpha_to: [u8; NN + 1],
    /// log_alpha(x), and [`A0`] for 0.
    index_of: [usize; NN + 1],
    /// The generator polynomial's coefficients, in index form, lowest
    /// power first.
    genpoly: Vec<usize>,
}

fn modnn(x: usize) -> usize {
    x % NN
}

impl Codec {
    /// `nroots` must leave room for data in a codeword (1..=254).
    pub fn new(nroots: usize) -> Option<Codec> {
        if nroots == 0 || nroots >= NN {
            return None;
        }
        let mut alpha_to = [0u8; NN + 1];
        let mut index_of = [0usize; NN + 1];
        index_of[0] = A0;
        let mut sr = 1usize;
        for (i, a) in alpha_to.iter_mut().enumerate().take(NN) {
            index_of[sr] = i;
            *a = sr as u8;
            sr <<= 1;
            if sr & 0x100 != 0 {
                sr ^= FIELD_POLY;
            }
        }
        // g(x) = (x - alpha^0)(x - alpha^1)...(x - alpha^(nroots-1)), built
        // up in polynomial form, then kept in index form.
        let mut g = vec![0u8; nroots + 1];
        g[0] = 1;
        for root in 0..nroots {
            g[root + 1] = 1;
            for j in (1..=root).rev() {
                g[j] = if g[j] != 0 {
                    g[j - 1] ^ alpha_to[modnn(index_of[g[j] as usize] + root)]
                } else {
                    g[j - 1]
                };
            }
            g[0] = alpha_to[modnn(index_of[g[0] as usize] + root)];
        }
        let genpoly = g.iter().map(|&c| index_of[c as usize]).collect();
        Some(Codec {
            nroots,
            alpha_to,
            index_of,
            genpoly,
        })
    }

    fn alpha(&self, i: usize) -> u8 {
        self.alpha_to[modnn(i)]
    }

    fn log(&self, x: u8) -> usize {
        self.index_of[x as usize]
    }

    /// The parity of `data` (at most `255 - nroots` bytes), as
    /// `encode_rs8()` computes it: what the kernel writes after a block.
    pub fn encode(&self, data: &[u8]) -> Vec<u8> {
        let n = self.nroots;
        let mut par = vec![0u8; n];
        for &d in data {
            let fb = self.log(d ^ par[0]);
            if fb != A0 {
                for (j, p) in par.iter_mut().enumerate().skip(1) {
                    *p ^= self.alpha(fb + self.genpoly[n - j]);
                }
            }
            par.rotate_left(1);
            par[n - 1] = if fb != A0 {
                self.alpha(fb + self.genpoly[0])
            } else {
                0
            };
        }
        par
    }

    /// Corrects `data` and its `par`ity (`nroots` bytes) in place and says
    /// how many symbols were wrong, parity included; a block with more
    /// errors than the code can correct is left as it was.
    pub fn decode(&self, data: &mut [u8], par: &mut [u8]) -> Result<usize, Uncorrectable> {
        let n = self.nroots;
        let len = data.len();
        if par.len() != n || len == 0 || len + n > NN {
            return Err(Uncorrectable);
        }
        let pad = NN - n - len;
        // The syndromes: the received word at each root of g(x), by Horner.
        let mut syn = vec![0u8; n];
        for &c in data.iter().chain(par.iter()) {
            for (i, s) in syn.iter_mut().enumerate() {
                *s = if *s == 0 {
                    c
                } else {
                    c ^ self.alpha(self.log(*s) + i)
                };
            }
        }
        if syn.iter().all(|&s| s == 0) {
            return Ok(0);
        }
        let s: Vec<usize> = syn.iter().map(|&x| self.log(x)).collect();

        // Berlekamp-Massey: lambda in polynomial form, b in index form.
        let mut lambda = vec![0u8; n + 1];
        lambda[0] = 1;
        let mut b: Vec<usize> = lambda.iter().map(|&x| self.log(x)).collect();
        let mut el = 0;
        for r in 1..=n {
            let mut discr = 0u8;
            for i in 0..r {
                if lambda[i] != 0 && s[r - i - 1] != A0 {
                    discr ^= self.alpha(self.log(lambda[i]) + s[r - i - 1]);
                }
            }
            let discr = self.log(discr);
            if discr == A0 {
                b.rotate_right(1);
                b[0] = A0;
                continue;
            }
            let mut t = vec![0u8; n + 1];
            t[0] = lambda[0];
            for i in 0..n {
                t[i + 1] = if b[i] != A0 {
                    lambda[i + 1] ^ self.alpha(discr + b[i])
                } else {
                    lambda[i + 1]
                };
            }
            if 2 * el < r {
                el = r - el;
                for (bi, &l) in b.iter_mut().zip(&lambda) {
                    *bi = if l == 0 {
                        A0
                    } else {
                        modnn(self.log(l) + NN - discr)
                    };
                }
            } else {
                b.rotate_right(1);
                b[0] = A0;
            }
            lambda = t;
        }
        let lambda: Vec<usize> = lambda.iter().map(|&x| self.log(x)).collect();
        let deg_lambda = lambda.iter().rposition(|&l| l != A0).unwrap_or(0);
        if deg_lambda == 0 {
            return Err(Uncorrectable);
        }

        // Chien search: the roots of lambda, each an error's place.
        let mut reg = lambda.clone();
        let (mut roots, mut locs) = (Vec::new(), Vec::new());
        for i in 1..=NN {
            let k = i - 1;
            let mut q = 1u8;
            for j in (1..=deg_lambda).rev() {
                if reg[j] != A0 {
                    reg[j] = modnn(reg[j] + j);
                    q ^= self.alpha_to[reg[j]];
                }
            }
            if q != 0 {
                continue;
            }
            if k < pad {
                // In the zeros before the data: not an error of this block.
                return Err(Uncorrectable);
            }
            roots.push(i);
            locs.push(k);
            if roots.len() == deg_lambda {
                break;
            }
        }
        if roots.len() != deg_lambda {
            return Err(Uncorrectable);
        }

        // Forney: omega(x) = s(x) lambda(x) mod x^nroots, then each value.
        let deg_omega = deg_lambda - 1;
        let omega: Vec<usize> = (0..=deg_omega)
            .map(|i| {
                let mut tmp = 0u8;
                for j in 0..=i {
                    if s[i - j] != A0 && lambda[j] != A0 {
                        tmp ^= self.alpha(s[i - j] + lambda[j]);
                    }
                }
                self.log(tmp)
            })
            .collect();
        let mut values = vec![0u8; roots.len()];
        let mut corrected = 0;
        for (j, &root) in roots.iter().enumerate() {
            let mut num1 = 0u8;
            for (i, &o) in omega.iter().enumerate() {
                if o != A0 {
                    num1 ^= self.alpha(o + i * root);
                }
            }
            if num1 == 0 {
                continue;
            }
            // With the first root 0: num2 = alpha^-root.
            let num2 = self.alpha(NN - root % NN);
            let mut den = 0u8;
            // lambda'(x): the odd coefficients.
            let mut i = deg_lambda.min(n - 1) & !1;
            loop {
                if lambda[i + 1] != A0 {
                    den ^= self.alpha(lambda[i + 1] + i * root);
                }
                if i < 2 {
                    break;
                }
                i -= 2;
            }
            values[j] = self.alpha(self.log(num1) + self.log(num2) + NN - self.log(den));
            corrected += 1;
        }

        // The errors found must give the syndromes received, or they are
        // a miscorrection.
        for (i, &si) in s.iter().enumerate() {
            let mut tmp = 0u8;
            for (&v, &loc) in values.iter().zip(&locs) {
                if v != 0 {
                    tmp ^= self.alpha(self.log(v) + i * (NN - loc - 1));
                }
            }
            if tmp != self.alpha_to[si] {
                return Err(Uncorrectable);
            }
        }
        for (&v, &loc) in values.iter().zip(&locs) {
            if loc < NN - n {
                data[loc - pad] ^= v;
            } else {
                par[loc - pad - len] ^= v;
            }
        }
        Ok(corrected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block as ramoops writes one: 128 bytes of text.
    fn block() -> Vec<u8> {
        (0..128u32).map(|i| (i * 37 + 11) as u8).collect()
    }

    #[test]
    fn a_clean_block_has_nothing_to_correct() {
        let rs = Codec::new(16).unwrap();
        let mut data = block();
        let mut par = rs.encode(&data);
        assert_eq!(rs.decode(&mut data, &mut par), Ok(0));
        assert_eq!(data, block());
    }

    #[test]
    fn up_to_half_the_parity_in_errors_is_corrected_anywhere() {
        let rs = Codec::new(16).unwrap();
        let clean = block();
        let clean_par = rs.encode(&clean);
        // Errors in the data, in the parity, and in both, 1 to 8 of them.
        for errors in 1..=8usize {
            for spread in [1usize, 7, 17] {
                let (mut data, mut par) = (clean.clone(), clean_par.clone());
                for e in 0..errors {
                    let at = (e * spread * 13 + errors) % (data.len() + par.len());
                    let flip = (e as u8).wrapping_mul(29) | 1;
                    match at.checked_sub(data.len()) {
                        None => data[at] ^= flip,
                        Some(p) => par[p] ^= flip,
                    }
                }
                let wrong = data.iter().zip(&clean).filter(|(a, b)| a != b).count()
                    + par.iter().zip(&clean_par).filter(|(a, b)| a != b).count();
                assert_eq!(
                    rs.decode(&mut data, &mut par),
                    Ok(wrong),
                    "{errors} errors, spread {spread}"
                );
                assert_eq!(data, clean, "{errors} errors, spread {spread}");
                assert_eq!(par, clean_par);
            }
        }
    }

    #[test]
    fn a_short_last_block_and_other_parity_sizes_decode() {
        for nroots in [2usize, 8, 16, 32] {
            let rs = Codec::new(nroots).unwrap();
            let clean: Vec<u8> = block()[..40].to_vec();
            let mut data = clean.clone();
            let mut par = rs.encode(&data);
            data[39] ^= 0x80;
            assert_eq!(rs.decode(&mut data, &mut par), Ok(1), "nroots {nroots}");
            assert_eq!(data, clean);
        }
    }

    #[test]
    fn too_many_errors_leave_the_block_as_it_was() {
        let rs = Codec::new(16).unwrap();
        let mut data = block();
        let mut par = rs.encode(&data);
        for b in &mut data[..20] {
            *b ^= 0x55;
        }
        let before = (data.clone(), par.clone());
        assert_eq!(rs.decode(&mut data, &mut par), Err(Uncorrectable));
        assert_eq!((data, par), before);
    }

    #[test]
    fn the_generator_has_the_roots_it_should() {
        // Every codeword vanishes at alpha^0..alpha^(nroots-1): a word of
        // data and its parity decodes clean at any length.
        let rs = Codec::new(16).unwrap();
        for len in [1usize, 12, 128, 239] {
            let mut data: Vec<u8> = (0..len).map(|i| (i * 7) as u8 ^ 0xa5).collect();
            let mut par = rs.encode(&data);
            assert_eq!(rs.decode(&mut data, &mut par), Ok(0), "len {len}");
        }
        assert!(Codec::new(0).is_none() && Codec::new(255).is_none());
    }
}
