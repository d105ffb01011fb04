//! The phases run in their declared order, whatever order systems are added in.

use std::sync::{Arc, Mutex};

use bevy_ecs::prelude::*;
use lsplat_engine::{Engine, TrainSystems};

#[derive(Resource, Clone, Default)]
struct Seen(Arc<Mutex<Vec<TrainSystems>>>);

#[test]
fn phases_run_in_declared_order() {
    let mut engine = Engine::new();
    let seen = Seen::default();
    engine.insert_resource(seen.clone());
    // Added in reverse, two systems per phase.
    for phase in TrainSystems::ALL.iter().rev().copied() {
        for _ in 0..2 {
            engine.add_systems(phase, move |s: Res<Seen>| s.0.lock().unwrap().push(phase));
        }
    }
    engine.step().unwrap();
    engine.step().unwrap();
    let got = seen.0.lock().unwrap().clone();
    let one: Vec<TrainSystems> = TrainSystems::ALL.iter().flat_map(|p| [*p, *p]).collect();
    let expected: Vec<TrainSystems> = one.iter().chain(one.iter()).copied().collect();
    assert_eq!(got, expected);
}

#[test]
fn plugins_are_recorded_and_function_plugins_work() {
    let mut engine = Engine::new();
    engine.add_plugin(|e: &mut Engine| {
        e.insert_resource(Seen::default());
    });
    assert_eq!(engine.plugins().len(), 1);
    assert!(engine.world.contains_resource::<Seen>());
}
