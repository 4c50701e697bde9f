//! chunkrt-learn: the learner's record. A run's episodes (`[episodes]`) exported as a
//! LeRobot dataset (`lerobot`'s `LeRobotDataset`, format v3.0) from the run's own records
//! (the recording, `events.jsonl`, `report.json`): no second logger.

pub mod lerobot;
