//! Google's wire APIs: the Gemini API (Generative Language) and Vertex AI.

pub mod gemini;
pub mod vertex;
