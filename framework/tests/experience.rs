//! Experience files: what a writer writes, a reader gives back bit for bit,
//! in either format, whatever the compression and however the files rotate;
//! partial, torn, truncated and mismatched files are named.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int64Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use rlx::experience::{
    Compression, DatasetInfo, Episode, ExperienceError, ExperienceReader, ExperienceWriter, InputSource, InputSpec,
    OutputFormat, OutputSettings,
};
use rlx::{fields, SampleBatch, Space};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn spaces() -> (Space, Space) {
    (Space::uniform_box(-10.0, 10.0, vec![3]).unwrap(), Space::discrete(4))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlx-experience-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `n` steps of made-up experience; the last ends the episode if `ends`.
/// Floats cover the awkward cases: tiny, huge, negative zero, thirds.
fn steps(seed: u32, n: usize, ends: bool) -> SampleBatch {
    let f = |i: usize| {
        let x = f32::from_bits((seed.wrapping_mul(2_654_435_761) ^ (i as u32).wrapping_mul(40_503)) & 0x7f7f_ffff);
        if i % 2 == 0 {
            -x
        } else {
            x
        }
    };
    let mut b = SampleBatch::new();
    b.insert_f32(fields::OBS, (0..3 * n).map(f).collect(), 3).unwrap();
    b.insert_f32(fields::NEW_OBS, (0..3 * n).map(|i| f(i + 7)).collect(), 3).unwrap();
    b.insert_i64(fields::ACTIONS, (0..n).map(|i| (i % 4) as i64).collect(), 1).unwrap();
    b.insert_f32(fields::REWARDS, (0..n).map(|i| 1.0 / (i as f32 + 3.0)).collect(), 1).unwrap();
    b.insert_f32(fields::ACTION_LOGP, (0..n).map(|i| -(i as f32) * 0.1 - 0.0).collect(), 1).unwrap();
    let end = |last: bool| (0..n).map(|i| if last && i + 1 == n { 1.0 } else { 0.0 }).collect();
    b.insert_f32(fields::TERMINATEDS, end(ends), 1).unwrap();
    b.insert_f32(fields::TRUNCATEDS, vec![0.0; n], 1).unwrap();
    b
}

/// Writes episodes of three env copies, interleaved and in pieces as an
/// evaluator adds them, and returns each episode's rows by the order it ended.
fn write(dir: &Path, format: OutputFormat, compression: Compression, max_file_size: u64) -> Vec<SampleBatch> {
    let (obs, act) = spaces();
    let settings = OutputSettings { dir: dir.to_path_buf(), format, compression, max_file_size };
    let mut writer = ExperienceWriter::new(settings, obs, act, "w1-g0");
    let mut running: Vec<Vec<SampleBatch>> = vec![Vec::new(); 3];
    let mut ended = Vec::new();
    for round in 0..60u32 {
        for copy in 0..3 {
            let n = 1 + ((round as usize * 7 + copy * 3) % 11);
            let ends = (round + copy as u32) % 4 == 3;
            let piece = steps(round * 3 + copy as u32, n, ends);
            running[copy].push(piece.clone());
            writer.add(copy, piece, ends).unwrap();
            if ends {
                ended.push(SampleBatch::concat(&std::mem::take(&mut running[copy])).unwrap());
            }
        }
    }
    writer.finish().unwrap();
    // What was still running is written, cut, at the end.
    ended.extend(running.iter().filter(|r| !r.is_empty()).map(|r| SampleBatch::concat(r).unwrap()));
    ended
}

fn read(spec: &str) -> Result<Vec<Episode>, ExperienceError> {
    ExperienceReader::open(&InputSpec::One(spec.into()))?.episodes().collect()
}

fn bits(batches: &[SampleBatch]) -> Vec<Vec<u32>> {
    let mut all: Vec<Vec<u32>> = batches
        .iter()
        .map(|b| {
            let mut v: Vec<u32> = Vec::new();
            for (_, column) in b.columns() {
                match column {
                    rlx::Column::F32 { data, .. } => v.extend(data.iter().map(|x| x.to_bits())),
                    rlx::Column::I64 { data, .. } => v.extend(data.iter().map(|&x| x as u32)),
                    rlx::Column::U8 { data, .. } => v.extend(data.iter().map(|&x| u32::from(x))),
                }
            }
            v
        })
        .collect();
    all.sort();
    all
}

const FORMATS: [(OutputFormat, Compression); 6] = [
    (OutputFormat::Json, Compression::Lz4),
    (OutputFormat::Json, Compression::Gzip),
    (OutputFormat::Json, Compression::None),
    (OutputFormat::Parquet, Compression::Lz4),
    (OutputFormat::Parquet, Compression::Gzip),
    (OutputFormat::Parquet, Compression::None),
];

#[test]
fn every_episode_comes_back_bit_for_bit_in_each_format_and_compression_across_rotated_files() {
    for (format, compression) in FORMATS {
        let dir = temp_dir(&format!("{format:?}-{compression:?}"));
        let written = write(&dir, format, compression, 4096);
        let reader = ExperienceReader::open(&InputSpec::One(dir.display().to_string())).unwrap();
        // gzip holds back what it compresses, so its files rotate later.
        assert!(reader.files().len() >= 2, "{format:?} {compression:?}: rotated at 4 KiB: {:?}", reader.files());
        assert!(reader.partial_files().is_empty());
        let extension = match format {
            OutputFormat::Json => compression.extension(),
            OutputFormat::Parquet => ".parquet",
        };
        assert!(reader.files().iter().all(|f| f.to_string_lossy().ends_with(extension)));
        let episodes: Vec<Episode> = reader.episodes().collect::<Result<_, _>>().unwrap();
        assert_eq!(episodes.len(), written.len(), "{format:?} {compression:?}");
        let rows: usize = episodes.iter().map(|e| e.batch.len()).sum();
        assert_eq!(rows, written.iter().map(SampleBatch::len).sum::<usize>());
        assert_eq!(bits(&episodes.iter().map(|e| e.batch.clone()).collect::<Vec<_>>()), bits(&written));
        // Every episode has its own id; the cut ones start at step 0 too
        // (they were written once, at the end).
        let ids: std::collections::BTreeSet<u64> = episodes.iter().map(|e| e.eps_id).collect();
        assert_eq!(ids.len(), episodes.len());
        assert!(ids.iter().all(|&id| id < 1 << 53));
        let info = reader.info();
        assert_eq!((&info.observation_space, &info.action_space), (&spaces().0, &spaces().1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_writer_that_never_finished_leaves_a_partial_file_that_readers_skip_and_whole_files_stay_whole() {
    for format in [OutputFormat::Json, OutputFormat::Parquet] {
        let dir = temp_dir(&format!("killed-{format:?}"));
        let (obs, act) = spaces();
        let settings = OutputSettings { dir: dir.clone(), format, compression: Compression::Lz4, max_file_size: 2048 };
        let mut writer = ExperienceWriter::new(settings, obs, act, "w1-g0");
        let mut written = 0;
        for e in 0..40u32 {
            writer.add(0, steps(e, 9, true), true).unwrap();
            written += 9;
        }
        // A kill: the writer is never dropped, its open file never finished.
        std::mem::forget(writer);
        let reader = ExperienceReader::open(&InputSpec::One(dir.display().to_string())).unwrap();
        assert_eq!(reader.partial_files().len(), 1, "{format:?}: at most one partial file");
        let episodes: Vec<Episode> = reader.episodes().collect::<Result<_, _>>().unwrap();
        let finished: usize = episodes.iter().map(|e| e.batch.len()).sum();
        assert!(finished > 0 && finished < written, "{format:?}: {finished} of {written} rows in finished files");
        // Every finished file is whole: each episode has its 9 rows.
        assert!(episodes.iter().all(|e| e.batch.len() == 9 && e.t0 == 0), "{format:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn torn_and_truncated_files_and_other_spaces_are_named() {
    let dir = temp_dir("torn");
    write(&dir, OutputFormat::Json, Compression::None, 1 << 20);
    let file = ExperienceReader::open(&InputSpec::One(dir.display().to_string())).unwrap().files()[0].clone();
    let text = std::fs::read_to_string(&file).unwrap();
    let lines = text.lines().count();
    std::fs::write(&file, &text[..text.len() - 20]).unwrap();
    let err = read(&dir.display().to_string()).unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()) && err.contains(&format!("line {lines}")), "{err}");
    assert!(err.contains("torn"), "{err}");

    let lz4 = temp_dir("truncated");
    write(&lz4, OutputFormat::Json, Compression::Lz4, 1 << 20);
    let file = ExperienceReader::open(&InputSpec::One(lz4.display().to_string())).unwrap().files()[0].clone();
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let err = read(&format!("{}/*.lz4", lz4.display())).unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()) && err.contains("cannot be read past line"), "{err}");

    let info = DatasetInfo::load(&lz4).unwrap();
    let err = info.check_spaces(&lz4, &spaces().0, &Space::discrete(5)).unwrap_err().to_string();
    assert!(err.contains("the dataset's action space is Discrete(4), but the run's is Discrete(5)"), "{err}");
    let err = read(&temp_dir("nothing").display().to_string()).unwrap_err().to_string();
    assert!(err.contains("no experience files there"), "{err}");
    for d in [dir, lz4] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn truncated_and_mistyped_parquet_files_are_named() {
    let dir = temp_dir("parquet-bad");
    write(&dir, OutputFormat::Parquet, Compression::Lz4, 1 << 20);
    let spec = dir.display().to_string();
    let file = ExperienceReader::open(&InputSpec::One(spec.clone())).unwrap().files()[0].clone();
    let whole = std::fs::read(&file).unwrap();

    // A file cut short (copied while written, a full disk) has no footer.
    std::fs::write(&file, &whole[..whole.len() * 2 / 3]).unwrap();
    let err = read(&spec).unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()) && err.contains("not a whole Parquet file"), "{err}");
    std::fs::write(&file, &whole).unwrap();
    assert!(read(&spec).is_ok());

    // _dataset.json says observations are 4 wide; the file's are 3.
    let json = dir.join("_dataset.json");
    let described = std::fs::read_to_string(&json).unwrap();
    let wider = described.replacen("\"width\": 3", "\"width\": 4", 1);
    assert_ne!(wider, described);
    std::fs::write(&json, wider).unwrap();
    let err = read(&spec).unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()) && err.contains("column new_obs is FixedSizeList"), "{err}");
    assert!(err.contains("but _dataset.json says"), "{err}");

    // A row whose step does not follow its episode's last is named.
    std::fs::write(&json, &described).unwrap();
    let rows = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&file).unwrap()).unwrap().build().unwrap();
    let rows = rows.collect::<Result<Vec<RecordBatch>, _>>().unwrap();
    let ids = rows[0].column_by_name("eps_id").unwrap().as_primitive::<Int64Type>().values().to_vec();
    let row = (1..ids.len()).find(|&i| ids[i] == ids[i - 1]).unwrap();
    let mut t = rows[0].column_by_name("t").unwrap().as_primitive::<Int64Type>().values().to_vec();
    t[row] += 1;
    let mut columns = rows[0].columns().to_vec();
    columns[1] = Arc::new(Int64Array::from(t.clone()));
    let skipped = RecordBatch::try_new(rows[0].schema(), columns).unwrap();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), skipped.schema(), None).unwrap();
    writer.write(&skipped).unwrap();
    writer.close().unwrap();
    let err = read(&spec).unwrap_err().to_string();
    let expected = format!("row {row}: step {} follows step {}", t[row], t[row - 1]);
    assert!(err.contains(&file.display().to_string()) && err.contains(&expected), "{err}");

    // An episode's rows out of step order (a file sorted by another
    // column) are named, not read as two episodes.
    // The first episode's later rows, the second episode, then the first
    // episode's first row.
    let first_end = (1..ids.len()).find(|&i| ids[i] != ids[0]).unwrap();
    let second_end = (first_end..ids.len()).find(|&i| ids[i] != ids[first_end]).unwrap_or(ids.len());
    let mut writer = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), rows[0].schema(), None).unwrap();
    writer.write(&rows[0].slice(1, first_end - 1)).unwrap();
    writer.write(&rows[0].slice(first_end, second_end - first_end)).unwrap();
    writer.write(&rows[0].slice(0, 1)).unwrap();
    writer.close().unwrap();
    let err = read(&spec).unwrap_err().to_string();
    let expected = format!("row {}: episode {} goes on at step 0", second_end - 1, ids[0]);
    assert!(err.contains(&expected) && err.contains("must be in step order"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_non_finite_value_is_refused_in_either_format_naming_its_column() {
    for format in [OutputFormat::Json, OutputFormat::Parquet] {
        let dir = temp_dir(&format!("nan-{format:?}"));
        let (obs, act) = spaces();
        let settings =
            OutputSettings { dir: dir.clone(), format, compression: Compression::None, max_file_size: 1 << 20 };
        let mut writer = ExperienceWriter::new(settings, obs, act, "w");
        let mut bad = steps(1, 4, true);
        bad.f32_mut(fields::REWARDS).unwrap()[2] = f32::NAN;
        let err = writer.add(0, bad, true).unwrap_err().to_string();
        assert!(err.contains("rewards holds NaN"), "{format:?}: {err}");
        writer.add(0, steps(2, 4, true), true).unwrap();
        writer.finish().unwrap();
        let episodes = read(&dir.display().to_string()).unwrap();
        assert_eq!(episodes.len(), 1, "{format:?}: the bad episode is not written, the next one is");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn input_hands_out_every_row_once_an_epoch_shuffled_and_postprocessed_per_episode() {
    let dir = temp_dir("input");
    let written = write(&dir, OutputFormat::Parquet, Compression::Lz4, 1 << 20);
    let total: usize = written.iter().map(SampleBatch::len).sum();
    let reader = ExperienceReader::open(&InputSpec::One(dir.display().to_string())).unwrap();
    let mut input = InputSource::new(reader, 100, 7);
    let mut episodes_seen = 0;
    let mut rows_read: Vec<Vec<u32>> = Vec::new();
    let mut taken = 0;
    let mut first_rows = Vec::new();
    while taken < total {
        let batch = input
            .next_rows(32.min(total - taken), |b: &mut SampleBatch| -> Result<(), ExperienceError> {
                episodes_seen += 1;
                let n = b.len();
                b.insert_f32("postprocessed", vec![n as f32; n], 1).unwrap();
                Ok(())
            })
            .unwrap();
        assert_eq!(batch.len(), 32.min(total - taken));
        rows_read.extend(batch.f32(fields::OBS).unwrap().chunks(3).map(|r| r.iter().map(|x| x.to_bits()).collect()));
        if first_rows.is_empty() {
            first_rows = batch.f32(fields::REWARDS).unwrap().to_vec();
        }
        assert!(batch.f32("postprocessed").is_ok());
        assert_eq!(input.repeated_rows(), 0, "the first pass repeats nothing");
        taken += batch.len();
    }
    assert_eq!(episodes_seen, written.len(), "each episode postprocessed once in the first epoch");
    assert_eq!(input.epochs(), 0);
    let mut rows_written: Vec<Vec<u32>> = written
        .iter()
        .flat_map(|b| {
            b.f32(fields::OBS).unwrap().chunks(3).map(|r| r.iter().map(|x| x.to_bits()).collect()).collect::<Vec<_>>()
        })
        .collect();
    rows_read.sort();
    rows_written.sort();
    assert_eq!(rows_read, rows_written, "every row once in an epoch");
    // Shuffled: the first batch's rewards are not the first episode's order.
    let first_episode: Vec<f32> = written.iter().flat_map(|b| b.f32(fields::REWARDS).unwrap().to_vec()).collect();
    assert_ne!(first_rows, first_episode[..32]);
    // The next rows start the second pass.
    input.next_rows(1, |_: &mut SampleBatch| -> Result<(), ExperienceError> { Ok(()) }).unwrap();
    assert_eq!((input.epochs(), input.repeated_rows()), (1, 1));
    // A call across a pass's end: the next pass's rows are its last ones.
    let reader = ExperienceReader::open(&InputSpec::One(dir.display().to_string())).unwrap();
    let mut input = InputSource::new(reader, 100, 7);
    let none = |_: &mut SampleBatch| -> Result<(), ExperienceError> { Ok(()) };
    input.next_rows(total - 5, none).unwrap();
    assert_eq!(input.next_rows(12, none).unwrap().len(), 12);
    assert_eq!((input.epochs(), input.repeated_rows()), (1, 7));

    // A window stops at its byte cap, whatever its rows (256 MiB by
    // default: image rows): capped below one episode, each window is one.
    let episodes_in_first_window = |cap: Option<usize>| {
        let reader = ExperienceReader::open(&InputSpec::One(dir.display().to_string())).unwrap();
        let input = InputSource::new(reader, 100, 7);
        let mut input = match cap {
            Some(bytes) => input.with_max_window_bytes(bytes),
            None => input,
        };
        let mut seen = 0;
        input.next_rows(1, |_: &mut SampleBatch| -> Result<(), ExperienceError> { Ok(seen += 1) }).unwrap();
        seen
    };
    assert_eq!(episodes_in_first_window(Some(1)), 1);
    let uncapped = episodes_in_first_window(None);
    assert!(uncapped >= 3, "100 rows of episodes of up to about 40 steps: {uncapped}");
    std::fs::remove_dir_all(&dir).unwrap();
}
