//! The suites' configuration edited by what it says — an integration's field, a route, a
//! sink — rather than by replacing its text: an edit naming something the fixture does
//! not hold fails at once instead of silently changing nothing.

use toml::{Table, Value};

use crate::process::ScratchDir;

/// A configuration document being edited.
#[derive(Debug, Clone)]
pub struct ConfigEdit {
    document: Table,
}

impl ConfigEdit {
    /// Any configuration's text.
    pub fn parse(text: &str) -> Self {
        Self {
            document: text.parse().expect("the configuration is TOML"),
        }
    }

    /// Integration `id`'s table.
    pub fn integration(&mut self, id: &str) -> &mut Table {
        entry_with_id(&mut self.document, "integration", id)
    }

    /// Sink `id`'s table.
    pub fn sink(&mut self, id: &str) -> &mut Table {
        entry_with_id(&mut self.document, "sink", id)
    }

    /// Integration `id`'s routes.
    pub fn routes(&mut self, id: &str) -> &mut Table {
        self.integration(id)
            .get_mut("routes")
            .and_then(Value::as_table_mut)
            .unwrap_or_else(|| panic!("integration {id} has no routes"))
    }

    /// Route `key` of integration `id`.
    pub fn route(&mut self, id: &str, key: &str) -> &mut Table {
        self.routes(id)
            .get_mut(key)
            .and_then(Value::as_table_mut)
            .unwrap_or_else(|| panic!("integration {id} has no route {key:?}"))
    }

    /// Renames route `from` of integration `id` to `to`, keeping what it says.
    pub fn rename_route(&mut self, id: &str, from: &str, to: &str) -> &mut Self {
        let routes = self.routes(id);
        let route = routes
            .remove(from)
            .unwrap_or_else(|| panic!("integration {id} has no route {from:?}"));
        routes.insert(to.to_owned(), route);
        self
    }

    /// Sets `field` of integration `id` (`Value::from` takes strings, numbers, tables).
    pub fn set(&mut self, id: &str, field: &str, value: impl Into<Value>) -> &mut Self {
        self.integration(id).insert(field.to_owned(), value.into());
        self
    }

    /// Appends the `[[integration]]` tables of `text` to the document's.
    pub fn add_integrations(&mut self, text: &str) -> &mut Self {
        let mut added = Self::parse(text).document;
        let Some(Value::Array(added)) = added.remove("integration") else {
            panic!("no [[integration]] in {text}");
        };
        self.document
            .get_mut("integration")
            .and_then(Value::as_array_mut)
            .expect("the document has integrations")
            .extend(added);
        self
    }

    /// The document as TOML text.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.document).expect("a table serializes")
    }

    /// Writes the document into `scratch` as `config.toml`, beside `files` (name, contents)
    /// with `{scratch}` resolved to them; returns the file's path.
    pub fn write_into(&self, scratch: &ScratchDir, files: &[(String, String)]) -> String {
        for (name, contents) in files {
            std::fs::write(scratch.path().join(name), contents).expect("write a file");
        }
        let path = scratch.path().join("config.toml");
        let text = self
            .to_toml()
            .replace("{scratch}", &scratch.path().display().to_string());
        std::fs::write(&path, text).expect("write config.toml");
        path.display().to_string()
    }
}

/// The element of array-of-tables `array` whose `id` is `id`.
fn entry_with_id<'d>(document: &'d mut Table, array: &str, id: &str) -> &'d mut Table {
    document
        .get_mut(array)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_table_mut)
        .find(|entry| entry.get("id").and_then(Value::as_str) == Some(id))
        .unwrap_or_else(|| panic!("no [[{array}]] with id {id:?}"))
}
