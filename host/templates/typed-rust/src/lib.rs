//! {{name}}: a typed component. Edit `wit/world.wit`, then implement what it exports
//! here; warren turns each exported function into a tool.

wit_bindgen::generate!({ path: "wit", world: "tools" });

struct Tools;

impl Guest for Tools {
    fn {{prefix}}_greet(name: String) -> String {
        format!("Hello, {name}!")
    }

    fn {{prefix}}_greet_person(person: Person, volume: Volume) -> Result<String, String> {
        if person.name.trim().is_empty() {
            return Err("the name is empty".into());
        }
        let name = match person.title {
            Some(title) => format!("{title} {}", person.name),
            None => person.name,
        };
        let greeting = format!("Hello, {name}!");
        Ok(match volume {
            Volume::Quiet => greeting.to_lowercase(),
            Volume::Normal => greeting,
            Volume::Loud => greeting.to_uppercase(),
        })
    }
}

export!(Tools);
