//! Google's wire APIs: the Gemini API (Generative Language) and Vertex AI.

/// A Google adapter type and the wire API behind it, written once for Gemini and Vertex: the
/// adapter holds its source of synthesized tool-call ids (`$ids` by default) and streams
/// through the shared driver; the module's own `prepare(ids, call)` builds the request, and
/// the chunks decode as Gemini's. Expects `API`, `prepare` and the imports of both modules in
/// scope.
macro_rules! google_adapter {
    ($(#[$doc:meta])* $name:ident, $ids:ty) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            ids: Arc<dyn ToolCallIds>,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self { ids: Arc::new(<$ids>::default()) }
            }
        }

        impl $name {
            /// An adapter that takes synthesized tool-call ids from `ids`.
            pub fn with_ids(ids: Arc<dyn ToolCallIds>) -> Self {
                Self { ids }
            }
        }

        impl StreamFn for $name {
            fn stream(
                &self,
                model: &Model,
                context: TranscriptContext,
                options: StreamOptions,
            ) -> AssistantMessageEventStream {
                driver::stream(Wire(self.clone()), model, context, options)
            }
        }

        #[doc = concat!("The wire API behind [`", stringify!($name), "`] (crate-private: its decoding types stay private).")]
        struct Wire($name);

        impl WireApi for Wire {
            type Dialect = GoogleDialect;
            type Decoder = GoogleDecode;
            const CANCEL: Cancel = GOOGLE_CANCEL;

            const API_ID: Option<&'static str> = Some(API);

            async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
                prepare(&self.0.ids, call).await
            }
        }
    };
}

pub mod gemini;
pub mod vertex;
