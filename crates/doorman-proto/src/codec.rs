//! The gRPC codec of `proto/doorman.proto`'s services: prost's encoding
//! with small buffers. tonic's default starts every call's encoder and
//! decoder with 8 KiB each, and a lease stream keeps both for as long as it
//! is open: 16 KiB per streaming holder, for messages of a few dozen
//! bytes. These start at [`BUFFER_SIZE`] and grow as a message needs.
//!
//! Must not: change the encoding (it is prost's, byte for byte).

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Each call's encode and decode buffers start this large.
pub const BUFFER_SIZE: usize = 256;

/// tonic's default: an encoder yields after this many bytes in a row.
const YIELD_THRESHOLD: usize = 32 * 1024;

/// prost's codec with [`BUFFER_SIZE`] buffers (the generated services'
/// `codec_path`).
#[derive(Debug, Clone)]
pub struct LeanCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        LeanCodec(PhantomData)
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER_SIZE, YIELD_THRESHOLD)
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}
